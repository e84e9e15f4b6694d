"""Reducing a campaign's new findings, and naming wrong results by what is left.

Runs after the fuzzing budget, so `budget` is the fuzzing time a user asked for and
reduction is a bounded extra (`reduce.budget` per finding, `reduce.max_findings` of
them). A wrong result has no message to name it by, so its final fingerprint comes
from the canonical op signature of the reduced model: two seeds that reduce to the
same graph are one bug, and the second is folded into the first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import onnx

from backends.client import WorkerClient
from backends.spec import parse_backend
from bot.bundle import BundleError, Finding
from bot.config import ReduceSettings
from bot.reduce import ClientPool, StillPasses, reduce_bundle
from bot.store import FindingStore, relative_to_root
from bot.summary import FindingRef, Summary
from oracles.signature import canonical_ops
from oracles.verdict import Verdict, wrong_result_name


@dataclass(frozen=True)
class SideRun:
    """How to run one side again: its backend spec string, interpreter and test fault."""

    spec: str
    python: str
    timeout_s: float
    fault: dict[str, object] | None = None


def final_name(model: onnx.ModelProto, finding: Finding) -> tuple[str, str]:
    """(signature, fingerprint) of a reduced finding: for a wrong result, from the reduced
    model's structure; otherwise what the reducer kept (the same normalized message)."""
    if finding.verdict is not Verdict.wrong_result:
        return finding.signature, finding.fingerprint
    return wrong_result_name(finding.backend.name, finding.symptom, canonical_ops(model))


def reduce_one(bundle: Path, culprit: SideRun, other: SideRun | None, cfg: ReduceSettings) -> Path | None:
    """The reduced bundle of the finding at `bundle`, or None when it did not reproduce (a
    flaky bug slips through k runs now and then; it stays unreduced rather than misnamed)."""
    pool = None
    if other is not None:
        spec, python, timeout = parse_backend(other.spec), other.python, other.timeout_s
        pool = ClientPool(lambda: WorkerClient(spec, python, timeout), 1)
    try:
        return reduce_bundle(
            bundle,
            cfg.budget,
            max_tests=cfg.max_tests,
            backend=culprit.spec,
            python=culprit.python,
            timeout_s=culprit.timeout_s,
            fault=dict(culprit.fault) if culprit.fault else None,
            also=StillPasses(pool) if pool else None,
        )
    except BundleError as e:
        print(f"warning: {bundle}: not reduced: {e}", file=sys.stderr)
        return None
    finally:
        if pool is not None:
            pool.close()


def rename_finding(ref: FindingRef, bundle: Path, reduced: Path, summary: Summary, store: FindingStore) -> bool:
    """Give `ref` (whose bundle is at `bundle`) its final name; False when that name belongs to
    an earlier finding, whose occurrences then absorb this one's."""
    finding = Finding.model_validate_json((reduced / "finding.json").read_text())
    model = onnx.load(str(reduced / "model.onnx"))
    signature, fp = final_name(model, finding)
    ref.reduced_path = relative_to_root(reduced, store.root)
    ref.reduced_nodes = len(model.graph.node)
    old = ref.fingerprint
    if fp != old:
        finding = finding.model_copy(update={"signature": signature, "fingerprint": fp})
        (reduced / "finding.json").write_text(finding.model_dump_json(indent=2) + "\n")
        store.rename(old, fp, signature)
        summary.occurrences[fp] = summary.occurrences.get(fp, 0) + summary.occurrences.pop(old, 0)
        ref.fingerprint, ref.signature = fp, signature
    store.offer(fp, bundle)
    return not any(other is not ref and other.fingerprint == fp for other in summary.findings)
