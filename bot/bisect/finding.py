"""Bisecting a campaign's new regressions between its base and head refs, on request.

The reduced bundle is bisected when there is one: it runs faster on every commit and
names the same bug. The outcome lands in the bundle as bisect.json, where reports
read it, before the summary mentions it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from backends.client import BackendUnavailable
from backends.spec import BackendSpecError, parse_backend
from bot.bisect.search import BisectError, BisectResult, CommitTester, bisect
from bot.config import FuzzConfig
from bot.findings.bundle import BundleError, load_bundle
from bot.sides.workspace import Workspace, WorkspaceError
from oracles.judging import Judging


def bisect_finding(cfg: FuzzConfig, bundle_path: Path) -> BisectResult | None:
    """The first bad commit of the finding at `bundle_path`; None when the campaign's
    sides are not refs, or the bisection could not run (said on stderr)."""
    compiler = cfg.compiler
    if compiler is None or not (compiler.base.ref and compiler.head.ref):
        return None
    reduced = bundle_path / "reduced"
    try:
        bundle = load_bundle(reduced if (reduced / "finding.json").is_file() else bundle_path)
        finding = bundle.finding
        if finding is None:
            return None
        identity = CommitTester.identity_of(finding, finding.across)
        workspace = Workspace(compiler, Path(cfg.cache_dir) / "sides")
        spec = parse_backend(finding.spec or cfg.backend)  # a campaign's finding: its config names the backend
        judging = Judging(cfg.oracles, cfg.tolerances)
        tester = CommitTester(workspace, spec, bundle, identity, judging, cfg.timeout)
        result = bisect(workspace, tester, compiler.base.ref, compiler.head.ref)
    except (BisectError, BundleError, WorkspaceError, BackendSpecError, BackendUnavailable) as e:
        print(f"warning: {bundle_path}: not bisected: {e}", file=sys.stderr)
        return None
    (bundle_path / "bisect.json").write_text(json.dumps(asdict(result), indent=2, default=str) + "\n")
    return result
