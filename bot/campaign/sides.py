"""Turning the `compiler:` section into two runnable sides, or into "cannot compare".

A side that fails to build must never look like a regression: the campaign does not
start, summary.json says why, and the exit status is an error, not a finding. A signal
while the sides build or the workers start and probe stops it the same way, with a
summary.json that says it was interrupted.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from backends.client import BackendUnavailable
from backends.spec import BackendSpec, adapter_class, parse_backend, worker_requirements
from bot.campaign.run import Campaign
from bot.campaign.side_setup import SideSetup
from bot.campaign.state import CampaignState
from bot.cases.shard import Shard
from bot.config import FuzzConfig
from bot.errors import Interrupted, UserError
from bot.findings.summary import SideRecord, Summary, write_summary
from bot.findings.summary_md import write_summary_md
from bot.sides.config import CompilerConfig, SideSpec
from bot.sides.isolation import BuildRoots, IsolationError
from bot.sides.workspace import Workspace, WorkspaceError
from oracles.sides import SideName


class CannotCompare(UserError):
    """One side could not be built or prepared; the message is one line and names the log."""


def cannot_compare(cfg: FuzzConfig, records: dict[str, SideRecord], why: object) -> CannotCompare:
    """Record in summary.json why no test ran, before the error is shown."""
    reason = f"cannot compare: {why}"
    write_summary(Summary(cannot_compare=reason, sides=records, budget_s=cfg.budget), Path(cfg.out))
    return CannotCompare(reason)


COVERAGE_REQUIREMENT = "coverage==7.17.3"
"""What head's worker measures the system's own Python code with (backends.code_coverage)."""


def measures_code(spec: BackendSpec) -> bool:
    """Whether the backend may have Python code of its own to measure: a plugin (never
    imported here) may; a built-in says so by its `coverage_modules`."""
    return spec.plugin or getattr(adapter_class(spec.adapter), "coverage_modules", None) != ()


def with_worker_requirements(compiler: CompilerConfig, spec: BackendSpec, measure: bool = False) -> CompilerConfig:
    """`compiler.packages` plus what the backend's worker imports besides the system (TVM's
    ONNX frontend needs onnx), and with `measure` the `coverage` package where there is
    Python code to measure, unless the user already names that project there."""
    named = {requirement_name(p) for p in compiler.packages}
    wanted = [*worker_requirements(spec), *([COVERAGE_REQUIREMENT] if measure and measures_code(spec) else [])]
    missing = [r for r in wanted if requirement_name(r) not in named]
    return compiler.model_copy(update={"packages": [*compiler.packages, *missing]}) if missing else compiler


def requirement_name(requirement: str) -> str:
    """The project a pip requirement names, normalized as pip compares them."""
    name = re.split(r"[\s<>=!~\[;@(]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def prepare_sides(
    cfg: FuzzConfig,
    on_side: Callable[[str, SideRecord], None] = lambda name, rec: None,
    records: dict[str, SideRecord] | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> tuple[list[SideSetup], dict[str, SideRecord]]:
    """Build (or reuse) base and head, each recorded in `records` (a campaign's state) as it
    is ready, so that a signal during the next build still finds it. On failure,
    summary.json records why before raising. `say`: a line as a build starts, while it
    runs long, and its log's tail when it fails (bot.sides.workspace.BuildLog)."""
    assert cfg.compiler is not None
    spec = parse_backend(cfg.backend)
    compiler = with_worker_requirements(cfg.compiler, spec, cfg.guide.code_coverage)
    workspace = Workspace(compiler, Path(cfg.cache_dir) / "sides", say=say)
    setups: list[SideSetup] = []
    records = {} if records is None else records
    for which in SideName:
        try:
            side = workspace.prepare_side(which)
        except WorkspaceError as e:  # its message names the side, the command and the log
            raise cannot_compare(cfg, records, e) from e
        record = SideRecord(
            label=side.label,
            commit=side.commit,
            python=str(side.python),
            build_log=str(side.log) if side.log else None,
            build_s=side.seconds,
            cached=side.cached,
        )
        records[which] = record
        on_side(which, record)
        roots = BuildRoots(side.root, side.shared) if side.root is not None else None
        setups.append(SideSetup(which, spec, str(side.python), side.build_id, roots))
    return setups, records


def pinned(compiler: CompilerConfig, records: dict[str, SideRecord]) -> CompilerConfig:
    """The config with each ref side replaced by the commit it resolved to: `main` tonight is
    not `main` when tomorrow's report job rebuilds head to re-run a repro."""
    sides = {
        which: SideSpec(ref=record.commit)
        for which, record in records.items()
        if getattr(compiler, which).ref and record.commit
    }
    return compiler.model_copy(update=sides)


def open_campaign(
    cfg: FuzzConfig,
    shard: Shard | None = None,
    on_side: Callable[[str, SideRecord], None] = lambda name, rec: None,
    configure: Callable[[Campaign], None] = lambda campaign: None,
    say: Callable[[str], None] = lambda line: None,
) -> Campaign:
    """A started campaign: sides built or reused, every worker up and proven to import its
    own build. A side that fails any of it is `cannot compare`, in summary.json and in the
    one-line error. `configure` sets the campaign's hooks before it starts. A signal on the
    way (SIGINT, SIGTERM: a CI job cancelled while it builds or probes) leaves a summary
    that says it was interrupted, as one during the fuzzing does."""
    state = CampaignState.of(cfg, shard)
    try:
        setups: list[SideSetup] | None = None
        if cfg.compiler is not None:
            setups, _ = prepare_sides(cfg, on_side, state.sides, say)
            state.compiler = pinned(cfg.compiler, state.sides)
        campaign = Campaign(cfg, setups, shard, state)
    except (Interrupted, KeyboardInterrupt):
        write_interrupted(state, Path(cfg.out))
        raise
    configure(campaign)
    try:
        campaign.start()
    except (BackendUnavailable, IsolationError) as e:
        if cfg.compiler is None:
            raise
        raise cannot_compare(cfg, state.sides, e) from e
    except (Interrupted, KeyboardInterrupt):
        campaign.write_results()  # marked interrupted: the signal is being handled
        raise
    return campaign


def write_interrupted(state: CampaignState, out: Path) -> None:
    """summary.json and summary.md of a campaign a signal stopped before it could start: the
    sides built so far, no tests. Called while the signal is handled, so marked with it."""
    summary = state.summary()
    write_summary(summary, out)
    write_summary_md(out, summary)
