"""`fuzzbot bisect`: the command-line face of bot/bisect/search.py, registered by bot/cli.py.

Exit status: 0 when the first bad commit is named, 3 (`EXIT_UNDECIDABLE`) when skipped
commits border the boundary and only a list of candidates can be given, 1 on any
error (a `BisectError`, printed by cli.py as one `error:` line).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:  # imported when the command runs: `fuzzbot --help` needs none of it
    from backends.spec import BackendSpec
    from bot.bisect.search import BisectResult, Step
    from bot.config import FuzzConfig
    from bot.findings.bundle import Bundle

EXIT_CULPRIT, EXIT_UNDECIDABLE = 0, 3
DEFAULT_CONFIG = Path("fuzzbot.yml")


def _config(path: Path | None) -> FuzzConfig:
    from bot.bisect.search import BisectError
    from bot.config import ConfigError, load_config

    if path is None:
        if not DEFAULT_CONFIG.is_file():
            raise BisectError("no config: pass --config FILE with a compiler: section (repo and build recipe)")
        path = DEFAULT_CONFIG
    try:
        cfg = load_config(path, {})
    except ConfigError as e:
        raise BisectError(str(e)) from e
    if cfg.compiler is None or not cfg.compiler.repo:
        raise BisectError(f"{path}: bisection needs a compiler: section with repo and build")
    return cfg


def _spec(cfg: FuzzConfig, bundle: Bundle, override: str | None) -> BackendSpec:
    """--backend, else the config's backend when it sets one, else the finding's."""
    from backends.spec import BackendSpecError, parse_backend
    from bot.bisect.search import BisectError

    assert bundle.finding is not None
    text = override or (cfg.backend if "backend" in cfg.model_fields_set else None) or bundle.finding.spec_text
    try:
        return parse_backend(text)
    except BackendSpecError as e:
        raise BisectError(f"backend {text!r}: {e}; pass --backend or set backend: in the config") from e


def _bundle(path: Path) -> Bundle:
    from bot.bisect.search import BisectError
    from bot.findings.bundle import load_bundle

    bundle = load_bundle(path)
    if bundle.finding is None or not bundle.finding.verdict.is_bug:
        raise BisectError(f"{path}: not a finding bundle (needs finding.json with a failing verdict)")
    return bundle


def _print_step(console: Console, step: Step) -> None:
    built = " (built)" if step.built else ""
    line = f"  {step.commit.short}  {step.outcome.value:<4}  {step.commit.subject}: {step.detail}{built}"
    console.print(line, markup=False)


def _report(out: Console, result: BisectResult, seconds: float) -> int:
    if result.first_bad is not None:
        c = result.first_bad
        out.print(f"first bad commit: {c.sha} {c.subject}", markup=False)
        out.print(f"  author: {c.author}\n  date:   {c.date}", markup=False)
    else:
        out.print(
            f"undecidable: skipped commits border the boundary; the first bad commit is one of "
            f"{len(result.candidates)}:",
            markup=False,
        )
        tested = {s.commit.sha: s for s in result.steps}
        for c in result.candidates:
            step = tested.get(c.sha)
            note = f"{step.outcome.value}: {step.detail}" if step else "not tested"
            out.print(f"  {c.sha[:12]} {c.subject} ({note})", markup=False)
    out.print(f"steps ({len(result.steps)}, {result.builds} built, {seconds:.1f}s):", markup=False)
    for step in result.steps:
        _print_step(out, step)
    return EXIT_CULPRIT if result.first_bad is not None else EXIT_UNDECIDABLE


def bisect_command(
    bundle: Annotated[Path, typer.Argument(help="a finding bundle folder (model, inputs, reference, finding.json)")],
    good: Annotated[str, typer.Option(help="a ref where the bug is absent")],
    bad: Annotated[str, typer.Option(help="a ref where the bug shows")],
    config: Annotated[
        Path | None, typer.Option(help="fuzzbot.yml with the compiler: section [default: ./fuzzbot.yml]")
    ] = None,
    reruns: Annotated[int, typer.Option(min=1, max=20, help="runs per commit; all must agree")] = 3,
    backend: Annotated[str | None, typer.Option(help="override NAME[:LEVEL] [default: config, then finding]")] = None,
    cache_dir: Annotated[
        Path | None, typer.Option(help="build cache [default: CONFIG cache_dir/sides, as campaigns]")
    ] = None,
    timeout: Annotated[str, typer.Option(help="per-run limit")] = "10s",
    retry_failed: Annotated[bool, typer.Option(help="build again the commits whose build failed before")] = False,
) -> int:
    """Find the first commit between --good and --bad that shows the bundle's bug (exit 3: undecidable)."""
    from bot.bisect.search import CommitTester, bisect
    from bot.config import parse_duration
    from bot.sides.workspace import Workspace
    from oracles.judging import Judging

    timeout_s = parse_duration(timeout, "--timeout")
    cfg = _config(config)
    assert cfg.compiler is not None
    found = _bundle(bundle)
    assert found.finding is not None
    identity = CommitTester.identity_of(found.finding, found.finding.across)
    workspace = Workspace(cfg.compiler, cache_dir or cfg.cache_dir / "sides", retry_failed=retry_failed)
    judging = Judging(cfg.oracles.model_copy(update={"reruns": reruns}), cfg.tolerances)
    tester = CommitTester(workspace, _spec(cfg, found, backend), found, identity, judging, timeout_s)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"bisecting {good}..{bad}: {identity.verdict.value}: {identity.signature}", markup=False)
    start = time.monotonic()
    result = bisect(workspace, tester, good, bad, on_step=lambda s: _print_step(err, s))
    return _report(Console(highlight=False, soft_wrap=True), result, time.monotonic() - start)
