"""The `fuzzbot` command line.

Exit codes: 0 no finding, 2 findings (bot.findings.outcome), 1 usage or internal error,
130 and 143 interrupted by SIGINT and SIGTERM (a campaign's summary.json then says
`stopped_by`). Every error a user can cause is one line on stderr, never a traceback.
"""

from __future__ import annotations

import faulthandler
import json
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from bot import __version__
from bot.commands.bisect import bisect_command
from bot.commands.check import check_command
from bot.commands.config_schema import config_schema_command
from bot.commands.known import known_bugs_command
from bot.commands.merge import merge_command
from bot.commands.reduce import reduce_command
from bot.commands.report import report_command
from bot.errors import EXIT_SIGNALLED, Interrupted, UserError, signal_of, signals_interrupt

if TYPE_CHECKING:  # the commands import what they run when they run: `--help` needs none of it
    from backends.results import RunResult
    from bot.campaign.run import Campaign
    from bot.cases.shard import Shard
    from bot.config import FuzzConfig
    from bot.findings.summary import SideRecord, Summary
    from generator.api import GenConfig, Support
    from generator.coverage import Coverage
    from oracles.sides import CrossJudgement

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: "[default: X]" in it is text, not a Rich tag
    help="Regression fuzzing for deep-learning compilers.",
)

EXIT_OK, EXIT_ERROR, EXIT_FINDINGS = 0, 1, 2


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"fuzzbot {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Regression fuzzing for deep-learning compilers."""


@app.command()
def fuzz(
    config: Annotated[Path | None, typer.Option(help="fuzzbot.yml")] = None,
    budget: Annotated[str | None, typer.Option(help="campaign length, e.g. 90s, 2m [default: 120s]")] = None,
    out: Annotated[Path | None, typer.Option(help="output folder [default: fuzzbot-out]")] = None,
    seed: Annotated[int | None, typer.Option(help="first seed [default: 0]")] = None,
    backend: Annotated[str | None, typer.Option(help="NAME[:LEVEL] [default: onnxruntime:all]")] = None,
    levels: Annotated[
        str | None, typer.Option(help="comma-separated levels each case draws one of, e.g. default,fold,inference")
    ] = None,
    nodes: Annotated[int | None, typer.Option(help="operators per model [default: 10]")] = None,
    python: Annotated[str | None, typer.Option(help="interpreter for the backend worker")] = None,
    timeout: Annotated[str | None, typer.Option(help="per-test run-stage limit [default: 10s]")] = None,
    compile_timeout: Annotated[str | None, typer.Option(help="per-test import+compile limit [default: 120s]")] = None,
    max_tests: Annotated[int | None, typer.Option(help="stop after N tests")] = None,
    jobs: Annotated[int | None, typer.Option(help="parallel lanes, each with a worker per side [default: 1]")] = None,
    shard: Annotated[str | None, typer.Option(help="I/N: run the I-th of N disjoint seed partitions")] = None,
    probe: Annotated[
        bool | None, typer.Option("--probe/--no-probe", help="probe op x dtype support first [default: probe]")
    ] = None,
    cache_dir: Annotated[Path | None, typer.Option(help="support-matrix cache [default: .fuzzbot-cache]")] = None,
    rules: Annotated[Path | None, typer.Option(help="your known-false-positive rules (YAML), besides ours")] = None,
    keep_filtered: Annotated[
        bool | None,
        typer.Option(
            "--keep-filtered/--no-keep-filtered",
            help="save bundles of every set-aside case too (filtered, unsupported, undefined input)",
        ),
    ] = None,
    corpus: Annotated[
        Path | None, typer.Option(help="case corpus: replay its cases first, then add the fresh ones (gen --corpus)")
    ] = None,
    regressions: Annotated[
        Path | None,
        typer.Option(help="regression corpus: judge its reduced findings before fuzzing, then add this run's"),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="print summary.json on stdout at the end (coverage and rewrites included)")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="clear an earlier run's results from --out first")] = False,
    test_fault: Annotated[str | None, typer.Option(hidden=True)] = None,
) -> None:
    """Fuzz a backend against the reference and keep every finding as a bundle."""
    from bot.config import load_config, parse_test_fault
    from bot.findings.out_folder import claim_out
    from bot.findings.outcome import findings_exit

    oracles = {k: v for k, v in {"rules": rules, "keep_filtered": keep_filtered}.items() if v is not None}
    overrides = {
        "budget": budget,
        "out": out,
        "seed": seed,
        "backend": backend,
        "levels": [lv.strip() for lv in levels.split(",") if lv.strip()] if levels is not None else None,
        "nodes": nodes,
        "python": python,
        "timeout": timeout,
        "compile_timeout": compile_timeout,
        "max_tests": max_tests,
        "jobs": jobs,
        "probe": probe,
        "cache_dir": cache_dir,
        "corpus": corpus,
        "regressions": regressions,
        "test_fault": parse_test_fault(test_fault),
        "oracles": oracles or None,
    }
    cfg = load_config(config, overrides)
    parts = _shard(shard)
    claim_out(Path(cfg.out), force)
    written = Path(cfg.out) / "summary.json"
    try:
        summary = _campaign(cfg, parts, Console(stderr=True))
    except Interrupted as e:
        e.note = f"the results so far are in {written}" if written.is_file() else ""
        raise
    if as_json and written.is_file():
        print(written.read_text(), end="")
    raise typer.Exit(findings_exit(summary))  # a PR check fails on what head broke, not on old bugs


def _campaign(cfg: FuzzConfig, shard: Shard | None, console: Console) -> Summary:
    from bot.campaign.display import live_progress, probe_failure_lines, probe_progress, summary_table
    from bot.campaign.sides import open_campaign
    from bot.findings.summary import rewrites_fired, symbolic_share

    with probe_progress(console) as on_progress:

        def hooks(campaign: Campaign) -> None:
            campaign.on_probe_progress = on_progress
            campaign.on_probe_failure = probe_failure_lines(console)

        campaign = open_campaign(
            cfg,
            shard,
            lambda name, r: console.print(_built(r), markup=False),
            hooks,
            lambda line: console.print(line, markup=False, soft_wrap=True),
        )
    if campaign.state.support is not None:
        s = campaign.state.support
        console.print(f"support: {s.supported} op x dtype pairs run, {s.unsupported} unsupported (left out)")
    with live_progress(console, cfg.budget) as on_test:
        summary = campaign.run(on_test)
    console.print(summary_table(summary))
    for line in filter(None, (rewrites_fired(summary.coverage), symbolic_share(summary.coverage))):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"summary: {cfg.out / 'summary.json'}")
    return summary


@app.command()
def gen(
    seed: Annotated[int, typer.Option(help="first seed")] = 0,
    count: Annotated[int, typer.Option(min=1, help="models to write")] = 1,
    nodes: Annotated[int, typer.Option(min=1, max=200, help="operators per model")] = 10,
    out: Annotated[Path, typer.Option(help="output folder")] = Path("fuzzbot-gen"),
    stats: Annotated[bool, typer.Option("--stats", help="print the diversity coverage of the models")] = False,
    bundles: Annotated[bool, typer.Option("--bundles/--no-bundles", help="write the bundles")] = True,
    feedback: Annotated[bool, typer.Option("--feedback/--no-feedback", help="steer toward uncovered pairs")] = True,
    ops: Annotated[str | None, typer.Option(help="comma-separated op types to draw from")] = None,
    dtypes: Annotated[str | None, typer.Option(help="comma-separated element types, e.g. float32,int64")] = None,
    patterns: Annotated[
        float | None, typer.Option(help="share of insertions that try a rewrite template (0: none) [default: 0.4]")
    ] = None,
    corpus: Annotated[
        Path | None, typer.Option(help="write the cases into this case corpus instead of bundles (fuzz --corpus)")
    ] = None,
    backend: Annotated[
        str | None, typer.Option(help="draw only what this backend runs (its support probe), e.g. onnxruntime")
    ] = None,
    cache_dir: Annotated[Path, typer.Option(help="where the probe's result is cached")] = Path(".fuzzbot-cache"),
    force: Annotated[bool, typer.Option("--force", help="clear earlier bundles from --out first")] = False,
    memory: Annotated[
        str | None,
        typer.Option(help="how much this process may grow making a case (none: no bound) [default: 4GiB]"),
    ] = None,
) -> None:
    """Write generated cases as bundles (model, inputs, reference) without running a backend."""
    from pydantic import ValidationError

    from backends.memory import bounded
    from bot.campaign.display import coverage_table
    from bot.cases.corpus_gen import probed_support
    from bot.config import ConfigError, memory_option
    from bot.findings.out_folder import claim_out
    from generator.api import GenConfig, op_specs
    from generator.coverage import Coverage

    try:
        cfg = GenConfig(
            nodes=nodes,
            feedback=feedback,
            **({"patterns": patterns} if patterns is not None else {}),
            ops=ops.split(",") if ops else None,
            **({"dtypes": dtypes.split(",")} if dtypes else {}),
        )
        op_specs(cfg.ops, cfg.opset)
        headroom = memory_option(memory)
    except ValidationError as e:
        err = e.errors()[0]
        raise UserError(f"gen: {'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from e
    except (ValueError, ConfigError) as e:
        raise UserError(f"gen: {str(e).splitlines()[0]}") from e
    if bundles and corpus is None:
        claim_out(out, force)
    coverage = Coverage()
    support = probed_support(backend, cfg.opset, cache_dir) if backend else None
    seeds = range(seed, seed + count)
    # Every case is computed in this process on a model the generator drew, and one may ask
    # for a tensor of any size: a case past the bound is dropped and counted, as a campaign's is.
    with bounded(headroom):
        if corpus is not None:
            _gen_corpus(corpus, cfg, seeds, coverage, support)
        else:
            _gen_bundles(out if bundles else None, cfg, seeds, coverage, support)
    if stats:
        Console().print(coverage_table(coverage, len(op_specs(cfg.ops, cfg.opset))))


def _gen_bundles(out: Path | None, cfg: GenConfig, seeds: range, coverage: Coverage, support: Support | None) -> None:
    """Each seed's case as a bundle under `out` (None: generated for `--stats` only, with no
    reference computed)."""
    from collections import Counter

    from backends.memory import OVER_BOUND, out_of_memory
    from bot.cases.making import make_case
    from bot.findings.bundle import write_bundle
    from generator.api import NoOpAllowed, generate
    from generator.values import NoValidValues
    from generator.z3_contexts import ContextSupply

    dropped: Counter[str] = Counter()
    contexts = ContextSupply()
    for s in seeds:
        if out is None:
            try:
                generate(s, cfg, support=support, coverage=coverage, contexts=contexts)
            except NoValidValues:
                dropped["no_valid_values"] += 1
            except (NoOpAllowed, RuntimeError, MemoryError) as e:
                dropped[OVER_BOUND if out_of_memory(e) else "no_op_allowed"] += 1
            continue
        made = make_case(s, cfg, support, coverage, None, contexts)
        if made.case is None:
            dropped[made.dropped] += 1
            continue
        # An edge case (generator.edges) may have no reference: torch refuses an integer
        # division by zero. It is written without one, as a campaign would run it.
        write_bundle(out / f"seed-{s}", made.case.model, made.case.inputs, made.case.reference)
    why = ", ".join(f"{n} {_DROPPED.get(reason, reason)}" for reason, n in sorted(dropped.items()))
    if sum(dropped.values()) == len(seeds):
        raise UserError(f"gen: none of the {len(seeds)} seed(s) gave a case: {why}")
    if out is not None:
        typer.echo(
            f"wrote {len(seeds) - sum(dropped.values())} bundle(s) to {out}"
            + (f"; {sum(dropped.values())} dropped: {why}" if dropped else "")
        )


_DROPPED = {
    "no_valid_values": "with no valid values",
    "no_op_allowed": "where no op fits these ops, dtypes and opset",
    "generation_failed": "whose generation failed",
    "over_memory_bound": "asking more memory than --memory",
}
"""Why `gen` dropped a seed (bot.cases.making's reasons), in words."""


def _gen_corpus(folder: Path, cfg: GenConfig, seeds: range, coverage: Coverage, support: Support | None) -> None:
    from bot.cases.corpus_gen import fill_corpus

    filled = fill_corpus(folder, cfg, seeds, coverage, support=support)
    if filled.dropped == len(seeds):
        raise UserError(f"gen: none of the {len(seeds)} seed(s) gave a model with these ops, dtypes and opset")
    notes = [f"{n} {what}" for n, what in ((filled.skipped, "already there"), (filled.dropped, "dropped")) if n]
    notes += [f"{filled.pruned} stale case(s) of another generator key pruned"] if filled.pruned else []
    typer.echo(
        f"added {filled.added} case(s) to {folder} ({filled.total} for this generator key)"
        + (f"; {', '.join(notes)}" if notes else "")
    )


@app.command()
def run(
    target: Annotated[Path, typer.Argument(help="a bundle folder or an .onnx file (inputs from an .npz beside it)")],
    backend: Annotated[list[str] | None, typer.Option(help="NAME[:LEVEL][,KEY=VALUE...]; repeatable")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="print JSON instead of a table")] = False,
    python: Annotated[
        list[str] | None, typer.Option(help="worker interpreter: once for all backends, or once per --backend")
    ] = None,
    timeout: Annotated[str, typer.Option(help="per-run limit")] = "30s",
    memory_mb: Annotated[int | None, typer.Option(min=64, help="worker address-space headroom in MiB")] = None,
    seed: Annotated[int, typer.Option(help="seed for inputs of a bare .onnx file")] = 0,
) -> None:
    """Run one case on one or more backends and judge each as a campaign would: the
    reference with its fallback, the false-positive rules and the numeric margin."""
    from backends.client import BackendUnavailable, WorkerClient
    from backends.spec import parse_backend
    from bot.campaign.triage import Side, Triage
    from bot.cases.user_cases import load_user_case
    from bot.config import parse_duration
    from oracles.config import OracleConfig
    from oracles.judging import Judging
    from oracles.rules import load_rules
    from oracles.sides import SideName
    from oracles.tolerances import ToleranceConfig

    specs = [parse_backend(b) for b in (backend or ["onnxruntime:all"])]
    pythons = _pythons(python, len(specs))
    limit = parse_duration(timeout, "--timeout")
    case = load_user_case(str(target), target, seed)
    triage = Triage(Judging(OracleConfig(reruns=1, localize=False), ToleranceConfig(), load_rules()))
    rows = []
    for spec, py in zip(specs, pythons, strict=True):
        try:
            with WorkerClient(spec, py, limit, memory_mb=memory_mb) as client:
                result = client.run(case.model_bytes, case.inputs)
                label = str(replace(spec, level=client.level))  # a plugin's default level comes from its worker
                cross = triage.triage(case, [Side(SideName.head, client)], [result])
        except BackendUnavailable as e:
            if len(specs) == 1:
                raise
            rows.append(_unavailable_row(str(spec), str(e)))
            continue
        rows.append(_run_row(label, result, cross))
    if json_output:
        typer.echo(json.dumps({"target": str(target), "inputs": case.inputs_from, "results": rows}, indent=2))
    else:
        _print_runs(rows)
    unavailable = [r for r in rows if r["status"] == "unavailable"]
    for r in unavailable:  # one line each on stderr, as every error is, beside the table's row
        ran = f"{len(rows) - len(unavailable)} of {len(rows)} backends ran"
        typer.echo(f"error: backend {r['backend']} is unavailable ({ran}): {' '.join(r['message'].split())}", err=True)
    if any(r.get("reported") for r in rows):
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_ERROR if unavailable else EXIT_OK)


def _pythons(python: list[str] | None, n: int) -> list[str]:
    given = python or [sys.executable]
    if len(given) == 1:
        return given * n
    if len(given) != n:
        raise UserError(f"--python: give one interpreter, or one per --backend ({n}); got {len(given)}")
    return given


def _run_row(backend: str, result: RunResult, cross: CrossJudgement) -> dict[str, Any]:
    """One backend's row, named as `fuzzbot check` names a one-build verdict (a crash on an
    undefined input is `crash_on_undefined_input`, counted and never a finding)."""
    from bot.commands.check import verdict_of

    info = result.backend
    j = cross.head.first
    return {
        "backend": backend,
        "version": info.version if info else "",
        "commit": info.commit if info else None,
        "python": info.executable if info else "",
        "status": result.status.value,
        "stage": result.stage.value if result.stage else None,
        "verdict": verdict_of(cross, two_sided=False),
        "reported": cross.verdict.is_reported and not cross.head.rule,
        "seconds": round(result.wall_s, 4),
        "compile_s": None if result.compile_s is None else round((result.import_s or 0.0) + result.compile_s, 4),
        "run_s": None if result.run_s is None else round(result.run_s, 4),
        "max_abs": j.comparison.max_abs if j.comparison else None,
        "max_rel": j.comparison.max_rel if j.comparison else None,
        "message": j.message,
        "fingerprint": j.fingerprint,
        "rule": cross.head.rule,
        "rule_detail": cross.head.rule_detail,
        "judged_by": j.judged_by,
    }


def _unavailable_row(backend: str, reason: str) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(("version", "commit", "stage", "verdict", "compile_s", "run_s"))
    row.update(backend=backend, status="unavailable", python="", seconds=None, max_abs=None, max_rel=None)
    return {**row, "message": reason, "fingerprint": "", "rule": None, "rule_detail": "", "judged_by": ""}


def _built(r: SideRecord) -> str:
    how = "cached" if r.cached else f"built in {r.build_s:.0f}s"
    sha = f"{r.commit[:12]}, " if r.commit and r.commit[:12] not in r.label else ""
    return f"{r.label} ({sha}{how})"


def _shard(text: str | None) -> Shard | None:
    from bot.cases.shard import Shard

    if text is None:
        return None
    try:
        return Shard.parse(text)
    except ValueError as e:
        raise UserError(f"--shard: {e}") from e


RUN_COLUMNS = ("backend", "version", "status", "stage", "verdict", "rule", "seconds", "max_abs", "max_rel")


def _print_runs(rows: list[dict[str, Any]]) -> None:
    console = Console()
    if not console.is_terminal:  # logs and pipes get every column, not an 80-column cut
        console = Console(width=160)
    table = Table()
    for col in RUN_COLUMNS:
        table.add_column(col, no_wrap=True)
    for r in rows:
        fmt = {k: ("" if v is None else f"{v:.3g}" if isinstance(v, float) else str(v)) for k, v in r.items()}
        table.add_row(*(fmt[c] for c in RUN_COLUMNS))
    console.print(table)
    for r in rows:
        if r["message"]:
            first = r["message"].strip().splitlines()[0] if r["message"].strip() else ""
            console.print(f"{r['backend']}: {first}", markup=False, highlight=False)


app.command("check")(check_command)
app.command("reduce")(reduce_command)
app.command("report")(report_command)
app.command("known-bugs")(known_bugs_command)
app.command("bisect")(bisect_command)
app.command("merge")(merge_command)
app.command("config-schema")(config_schema_command)

_USER_ERRORS = (
    ("bot.errors", "UserError"),
    ("backends.spec", "BackendSpecError"),
    ("backends.client", "BackendUnavailable"),
    ("backends.reference", "ReferenceError"),
    ("oracles.rules", "RulesError"),
)
"""fuzzbot's own family (bot.errors.UserError: every bot package's errors derive from it),
and the families of the packages below the bot, which may not import it: by module and
name, since a command imports its modules only when it runs."""


def _is_user_error(e: BaseException) -> bool:
    """One of _USER_ERRORS. An exception's class is loaded, so a module not loaded yet
    cannot have raised one of its own, and is not imported to find out."""
    for module, name in _USER_ERRORS:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(e, getattr(loaded, name)):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if not faulthandler.is_enabled():
        # A crash inside a C extension in this process (a campaign died of SIGSEGV in onnx's
        # checker or shape inference) then prints every thread's Python stack, naming the
        # call and the case, where it printed nothing.
        faulthandler.enable(file=2, all_threads=True)  # fd 2: pytest or a caller may swap sys.stderr
    try:
        # Generated values reach inf and NaN by design (an overflowing float16 sum, a cast of
        # inf), and the oracles judge them as values: numpy's warnings about them filled a
        # campaign's log with hundreds of lines that say nothing about the compiler.
        with signals_interrupt(), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # every thread, unlike np.errstate
            code = app(args=argv, standalone_mode=False, prog_name="fuzzbot")
        return code if isinstance(code, int) else EXIT_OK
    except typer.TyperException as e:  # usage errors and bad parameters
        # A bare `fuzzbot` is the help, with no error line (typer vendors click privately).
        if type(e).__name__ == "NoArgsIsHelpError":
            err.print(e.format_message(), markup=False)
        elif message := e.format_message():
            err.print(f"error: {message}", markup=False)
    except (Interrupted, KeyboardInterrupt, typer.Abort) as e:
        sig = signal_of(e)
        note = f"; {e.note}" if isinstance(e, Interrupted) and e.note else ""
        err.print(f"error: interrupted by {sig}{note}", markup=False)
        return EXIT_SIGNALLED[sig]
    except Exception as e:  # noqa: BLE001 - the last line of defence keeps it to one line
        if _is_user_error(e):
            err.print(f"error: {e}", markup=False)
        else:
            err.print(f"internal error: {type(e).__name__}: {e}", markup=False)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
