"""Mutation analysis of real compilers: how many small semantic changes to a converter's
source a PR check catches. The measure nobody can tune to.

A PR regression is a small change to a compiler's source; mutation testing makes such
changes at random. cosmic-ray (chosen over mutmut because it enumerates and applies one
mutation to a source file as a library call, where mutmut 3 rewrites every function of the
package into trampolines switched by its own test runner, so its mutants are not a build a
PR could make) enumerates every mutation point of the target's files; a recorded seed draws
from them and splits the draw, once, into a tuning half and a reporting half. Each mutant is
a head: base plus that one mutation.

Two targets:

- `onnx2torch`: a pure-Python ONNX converter, fuzzed from inside its own checkout as the
  Action runs it (`--repo`, a clone of its repository; `repo: .`, `ref` sides built by
  `pip install --no-deps .`, examples/onnx2torch_backend.py as the plugin). A mutant is a
  commit on a branch of a clone under `--work`.
- `tvm`: TVM's Relax ONNX frontend (`tvm/relax/frontend/onnx/onnx_frontend.py`, Python in
  the apache-tvm wheel). Base and head are two venvs of one release (`python` sides); the
  mutant is written into head's copy of the file, and put back after.

A mutant is killed when a `--budget` PR campaign (default config; `on`: guidance as shipped,
`off`: divergence, mutation, hint and code coverage all off; `untwinned`: guidance on,
constant twins off) reports a `new_regression`
whose reduced model reaches the mutated function: head's worker runs it with the function's
file measured (backends.code_coverage). The time to kill is when that finding was kept. A
head that does not even start (an import error) is incompetent and is not counted.

Survivors then meet a bounded search for equivalence (`equiv`): the converter's own tests
(onnx2torch's `tests/node_converters`; a test that fails on base too says nothing), then a
long campaign. Every test exports its model through torch, and the whole suite takes over
an hour, so a mutant is judged by the tests that ran its lines on base (`--own-tests
covered`: base's suite measured once, one coverage context per test) or by the test file
named for its module (`named`: no whole-suite run). One neither kills is set aside as
equivalent; one the tests do not kill whose long campaign was skipped (`--long-budget 0`)
stays undecided. `--classes` (a JSON
file: mutant id -> class and note, written by hand after reading each) names the
survivors' classes in the report.

A mutant that survived may still have been reported: head declining a model base ran right
is `dropped_support`, which a maintainer sees in the comment and can fail the check on. The
report counts those whose bundle reaches the mutated function beside the kills
(`killed_or_dropped_reaching`); the kill rate stays the strict one.

Subcommands: `draw`, `run` (one half, every mode side by side, each mutant's result appended
to results-TARGET.jsonl as it lands, so a run can be resumed), `equiv`, `rescore` (the
dropped-support reach of rows written before it was measured), `report` (JSON).
`campaign` runs one mutant in one mode (`run` starts one per mode at once).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples" / "onnx2torch_backend.py"
O2T_BACKEND = f"{PLUGIN}:Onnx2TorchAdapter"
O2T_PACKAGES = ["numpy==2.4.6", "onnx==1.23.2", "torch==2.13.0", "coverage==7.17.3"]
"""coverage too in both modes: one build serves both, and the reach check measures head's code."""
TVM_PACKAGES = ["numpy==2.4.6", "onnx==1.23.2", "apache-tvm==0.27.0.post1", "apache-tvm-ffi==0.1.15.post2"]
TVM_FILE = "tvm/relax/frontend/onnx/onnx_frontend.py"
HALVES = ("tune", "report")
MODES = ("on", "off", "untwinned")
GENERATION_OFF: dict[str, dict[str, float]] = {"untwinned": {"constant_twins": 0.0}}
"""Modes that switch a generation feature off, guidance on: a feature that should find bugs
is judged on mutants, on and off side by side (`--modes on,untwinned`)."""
AFTER_SHARE = 0.34
"""The share of the budget reductions get after the fuzzing (the default config gives 1.0)."""
SKIP_OPERATORS = frozenset({"core/VariableReplacer", "core/VariableInserter"})
"""cosmic-ray's operators that need arguments of their own (which names to swap in)."""


@dataclass
class Mutant:
    id: str
    file: str
    """Path inside the package's tree (`onnx2torch/node_converters/pad.py`, TVM_FILE)."""
    operator: str
    occurrence: int
    line: int
    function: str
    """The innermost function or class holding the mutation (`Gelu._impl_v20`), or `<module>`."""
    span: tuple[int, int]
    """Its first and last line in the mutated source: what a model must execute to reach it."""
    half: str


@dataclass
class Result:
    mutant: str
    mode: str
    half: str
    outcome: str
    """killed, survived, incompetent (head does not start), or error (the campaign failed)."""
    kill_s: float | None = None
    finding: str = ""
    reached_by: str = ""
    """reduced or original: which model of the killing finding reached the function."""
    regressions: int = 0
    """new_regression findings, whether or not one reached the function."""
    dropped_support: int = 0
    dropped_reaches: bool = False
    """A dropped-support bundle's model reaches the mutated function: a change the check
    reports (and fails on, with oracles.fail_on_dropped_support), though no new_regression."""
    tests: int = 0
    fuzz_s: float = 0.0
    total_s: float = 0.0
    note: str = ""
    counts: dict[str, int] = field(default_factory=dict)


# The draw -----------------------------------------------------------------------------


def target_files(target: str, source_root: Path) -> list[Path]:
    """The files mutated: every module of onnx2torch's package, or TVM's ONNX frontend."""
    if target == "tvm":
        return [source_root / TVM_FILE]
    return sorted(p for p in (source_root / "onnx2torch").rglob("*.py") if p.name != "__init__.py")


def population(files: list[Path], source_root: Path) -> list[tuple[str, str, int, int]]:
    """Every (file, operator, occurrence, line) cosmic-ray can mutate, in a fixed order."""
    from cosmic_ray.ast import ast_nodes, get_ast
    from cosmic_ray.plugins import get_operator, operator_names

    out = []
    for path in files:
        tree = get_ast(path.read_text())
        for name in sorted(operator_names()):
            cls = get_operator(name)
            if name in SKIP_OPERATORS or cls.arguments():
                continue
            op = cls()
            places = [start for node in ast_nodes(tree) for start, _ in op.mutation_positions(node)]
            out += [(path.relative_to(source_root).as_posix(), name, i, start[0]) for i, start in enumerate(places)]
    return out


def mutate_source(code: str, operator: str, occurrence: int) -> str | None:
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    mutated: str | None = mutate_code(code, get_operator(operator)(), occurrence)
    return mutated


def enclosing(source: str, line: int) -> tuple[str, tuple[int, int]]:
    """The innermost function (or class) around `line`, dotted, with its line span. A
    decorator line is not the function's: it runs at import, for every model alike, so a
    mutant there (a converter's registration) belongs to the scope around it."""
    best: tuple[str, tuple[int, int]] = ("<module>", (1, len(source.splitlines())))

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                start, end = child.lineno, child.end_lineno or child.lineno
                if start <= line <= end:
                    best = (f"{prefix}{child.name}", (start, end))
                    visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return best


def draw(target: str, source_root: Path, seed: int, count: int) -> dict[str, Any]:
    """`count` mutants in a seeded order, split once into halves by position (even: tune,
    odd: report); each half takes its mutants in order until it has enough competent ones."""
    places = population(target_files(target, source_root), source_root)
    rng = random.Random(seed)
    picked = rng.sample(places, min(count, len(places)))
    mutants = []
    unparsable = 0
    for i, (file, operator, occurrence, line) in enumerate(picked):
        code = (source_root / file).read_text()
        mutated = mutate_source(code, operator, occurrence)
        if mutated is None:
            continue
        try:
            function, span = enclosing(mutated, line)
        except SyntaxError:  # cosmic-ray replaced a `*` marker of a signature: no build a PR could make
            unparsable += 1
            continue
        mutant = Mutant(f"{target}-{i:03d}", file, operator, occurrence, line, function, span, HALVES[i % 2])
        mutants.append(asdict(mutant))
    by_operator: dict[str, int] = {}
    for _, operator, _, _ in places:
        family = operator.split("/")[-1].split("_")[0]
        by_operator[family] = by_operator.get(family, 0) + 1
    return {
        "target": target,
        "seed": seed,
        "population": len(places),
        "operators": by_operator,
        "unparsable": unparsable,
        "mutants": mutants,
    }


# Heads ----------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        "GIT_AUTHOR_NAME": "mutant",
        "GIT_AUTHOR_EMAIL": "mutant@fuzzbot.invalid",
        "GIT_COMMITTER_NAME": "mutant",
        "GIT_COMMITTER_EMAIL": "mutant@fuzzbot.invalid",
    }
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True)
    return done.stdout.strip()


class Onnx2Torch:
    """onnx2torch from its own checkout: a clone under the work folder, a branch per mutant."""

    name = "onnx2torch"
    package = "onnx2torch"

    def __init__(self, work: Path, repo: Path | None) -> None:
        self.clone = work / "onnx2torch-repo"
        if not self.clone.is_dir():
            if repo is None:
                raise SystemExit("error: onnx2torch needs --repo, a checkout of its repository")
            subprocess.run(["git", "clone", "-q", str(repo), str(self.clone)], check=True)
        self.base = git(self.clone, "rev-parse", "HEAD")

    @property
    def source_root(self) -> Path:
        return self.clone

    def make_head(self, mutant: Mutant) -> str:
        """A branch `mutant-ID` holding base plus the mutation, committed with fixed dates."""
        git(self.clone, "checkout", "-q", "-B", f"mutant-{mutant.id}", self.base)
        path = self.clone / mutant.file
        mutated = mutate_source(path.read_text(), mutant.operator, mutant.occurrence)
        assert mutated is not None
        path.write_text(mutated)
        git(self.clone, "commit", "-q", "-am", f"mutant {mutant.id}: {mutant.operator} #{mutant.occurrence}")
        git(self.clone, "checkout", "-q", self.base)
        return f"mutant-{mutant.id}"

    def restore(self) -> None:
        pass

    def config(self, head: str) -> dict[str, Any]:
        return {
            "backend": O2T_BACKEND,
            "compiler": {
                "repo": ".",
                "build": ["pip install --no-deps ."],
                "packages": O2T_PACKAGES,
                "base": {"ref": self.base},
                "head": {"ref": head},
            },
        }

    def cwd(self) -> Path:
        return self.clone

    def head_python(self, cache: Path, head: str) -> Path:
        """The interpreter of head's build, which the campaign made under `cache`."""
        sha = git(self.clone, "rev-parse", head)[:12]
        found = sorted((cache / "sides" / "builds").glob(f"{sha}-*/venv/bin/python"))
        if not found:
            raise FileNotFoundError(f"no build of {sha} under {cache}")
        return found[0]


def _purelib(venv: Path) -> Path:
    ask = [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    return Path(subprocess.run(ask, capture_output=True, text=True, check=True).stdout.strip())


class TvmFrontend:
    """TVM's Relax ONNX frontend: two venvs of one release, head's frontend file mutated."""

    name = "tvm"
    package = "tvm.relax.frontend"

    def __init__(self, work: Path) -> None:
        self.base_venv, self.head_venv = work / "tvm-base", work / "tvm-head"
        self.cache = work / "cache"
        self.site = Path()
        self.original = ""

    def prepare(self) -> TvmFrontend:
        """Both venvs built (once), and head's frontend as the release ships it."""
        for venv in (self.base_venv, self.head_venv):
            if not (venv / ".complete").exists():
                shutil.rmtree(venv, ignore_errors=True)
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
                pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *TVM_PACKAGES, "coverage==7.17.3"]
                subprocess.run(pip, check=True, capture_output=True)
                (venv / ".complete").write_text("\n".join(TVM_PACKAGES) + "\n")
        self.site = _purelib(self.head_venv)
        # Base's copy is the release's own: base is never mutated, while head's copy is a
        # mutant's until `restore`, and a run stopped without it left one there (every later
        # mutant was that one plus its own).
        self.original = (_purelib(self.base_venv) / TVM_FILE).read_text()
        self._probe_unmutated()
        return self

    def _probe_unmutated(self) -> None:
        """Each venv's support probed once, unmutated, into the campaigns' cache (it is keyed
        by the interpreter): every mutant's campaign reuses it, as a PR's head would reuse
        base's answers for what the change did not touch. Probing a mutant's head afresh would
        take minutes per mutant, and would leave out of generation what the mutant declines."""
        self.restore()
        marker = self.head_venv / ".probed"
        if marker.exists():
            return
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp) / "fuzzbot.yml"
            config.write_text(
                json.dumps({**self.config(str(self.head_venv / "bin" / "python")), "cache_dir": str(self.cache)})
            )
            cmd = [sys.executable, "-m", "bot.cli", "fuzz", "--config", str(config), "--max-tests", "1"]
            subprocess.run([*cmd, "--out", str(Path(tmp) / "out")], cwd=ROOT, capture_output=True, check=False)
        marker.write_text("probed\n")

    @property
    def source_root(self) -> Path:
        return self.site

    def make_head(self, mutant: Mutant) -> str:
        mutated = mutate_source(self.original, mutant.operator, mutant.occurrence)
        assert mutated is not None
        self._write(mutated)
        return str(self.head_venv / "bin" / "python")

    def restore(self) -> None:
        self._write(self.original)

    def _write(self, text: str) -> None:
        path = self.site / TVM_FILE
        path.write_text(text)
        shutil.rmtree(path.parent / "__pycache__", ignore_errors=True)

    def config(self, head: str) -> dict[str, Any]:
        return {
            "backend": "tvm",
            "compiler": {"base": {"python": str(self.base_venv / "bin" / "python")}, "head": {"python": head}},
        }

    def cwd(self) -> Path:
        return ROOT

    def head_python(self, cache: Path, head: str) -> Path:
        return Path(head)


Target = Onnx2Torch | TvmFrontend


def open_target(name: str, work: Path, repo: Path | None) -> Target:
    return Onnx2Torch(work, repo) if name == "onnx2torch" else TvmFrontend(work).prepare()


# One campaign ----------------------------------------------------------------------------


def reaches(python: Path, backend: str, package: str, model: Path, mutant: Mutant) -> bool:
    """Whether head, running `model`, executes a line of the mutated function (measured by
    the worker's own code coverage, every arc of the run)."""
    import numpy as np

    from backends.client import WorkerClient
    from backends.spec import parse_backend

    bundle = model.parent
    with np.load(bundle / "inputs.npz", allow_pickle=False) as f:
        inputs = {k: f[k] for k in f.files}
    with WorkerClient(parse_backend(backend), str(python), 60.0, coverage=[package]) as client:
        client.submit(model.read_bytes(), inputs, measure="all")
        result = client.collect()
    first, last = mutant.span
    for name, arcs in result.arcs.items():
        same = name == mutant.file or name.endswith("/" + mutant.file) or mutant.file.endswith("/" + name)
        if same and any(first <= line <= last for arc in arcs for line in arc):
            return True
    return False


def dropped_reaching(python: Path, backend: str, package: str, out: Path, mutant: Mutant) -> bool:
    """Whether a dropped-support bundle the campaign kept makes head execute the mutated
    function (summary.json's support_changes: a few bundles per key)."""
    from bot.findings.summary import in_output

    summary = json.loads((out / "summary.json").read_text())
    for dropped in (summary.get("support_changes") or {}).get("dropped", []):
        model = in_output(out, dropped["path"]) / "model.onnx"
        if model.is_file() and reaches(python, backend, package, model, mutant):
            return True
    return False


def rescore(args: argparse.Namespace) -> None:
    """Past rows of onnx2torch mutants that survived with dropped support: whether a kept
    bundle of it reaches the mutated function (rows written before `dropped_reaches` was)."""
    work: Path = args.work
    target = open_target(args.target, work, args.repo)
    if not isinstance(target, Onnx2Torch):
        raise SystemExit("rescore: onnx2torch only (a TVM head is the shared venv a run may be using)")
    rows = results(work, args.target)
    done = {(r["mutant"], r["mode"]) for r in rows if r.get("phase") == "rescore"}
    by_id = {m.id: m for m in load_draw(work, args.target)}
    for r in rows:
        if r.get("phase", "campaign") != "campaign" or (r["mutant"], r["mode"]) in done:
            continue
        if r["outcome"] != "survived" or not r.get("dropped_support") or "dropped_reaches" in r:
            continue
        mutant = by_id[r["mutant"]]
        python = target.head_python(work / "cache", target.make_head(mutant))
        out = work / "out" / target.name / f"{mutant.id}-{r['mode']}"
        verdict = {"mutant": mutant.id, "mode": r["mode"], "half": r["half"], "phase": "rescore"}
        verdict["dropped_reaches"] = dropped_reaching(python, O2T_BACKEND, target.package, out, mutant)
        with open(work / f"results-{args.target}.jsonl", "a") as f:
            f.write(json.dumps(verdict) + "\n")
        print(json.dumps(verdict), file=sys.stderr, flush=True)


def run_campaign(target: Target, mutant: Mutant, mode: str, head: str, work: Path, budget: float) -> Result:
    """One PR campaign, base against the mutant, stopped once a new_regression reaching the
    mutated function is kept; then its reduced model must reach it too."""
    from bot.campaign.sides import open_campaign
    from bot.campaign.state import CampaignState
    from bot.config import FuzzConfig, GuideSettings
    from bot.errors import UserError
    from bot.findings.summary import FindingRef, in_output

    out = work / "out" / target.name / f"{mutant.id}-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    guide = (
        GuideSettings()
        if mode != "off"
        else GuideSettings(divergence=False, mutation=False, hint=False, code_coverage=False)
    )
    raw = {
        **target.config(head),
        "generator": GENERATION_OFF.get(mode, {}),
        "budget": budget,
        "out": str(out),
        "cache_dir": str(work / "cache"),
        "guide": guide,
        # After the budget only a new_regression's reduction counts here, and the reduction
        # order puts them first: a third of the budget, not the whole of it, per mutant.
        "reduce": {"share": AFTER_SHARE},
    }
    cfg = FuzzConfig.model_validate(raw)
    result = Result(mutant.id, mode, mutant.half, "survived")
    t0 = time.monotonic()
    os.chdir(target.cwd())
    try:
        run = open_campaign(cfg)
    except UserError as e:
        result.outcome, result.note = ("incompetent" if "head" in str(e) else "error"), str(e)[:300]
        return result
    python = target.head_python(work / "cache", head)
    backend = O2T_BACKEND if target.name == "onnx2torch" else "tvm"
    looked: set[int] = set()
    kills: list[FindingRef] = []

    def watch(state: CampaignState) -> None:
        for ref in state.kept.findings:
            if id(ref) in looked or ref.across != "new_regression":
                continue
            looked.add(id(ref))
            if reaches(python, backend, target.package, in_output(out, ref.path) / "model.onnx", mutant):
                kills.append(ref)
                run.stop()

    summary = run.run(on_test=watch)
    result.tests, result.fuzz_s = summary.tests, round(summary.wall_s, 1)
    result.counts = dict(summary.counts)
    result.dropped_support = summary.counts.get("dropped_support", 0)
    regressions = [r for r in summary.findings if r.across == "new_regression"]
    result.regressions = len(regressions)
    for ref in sorted(regressions, key=lambda r: r.found_s if r.found_s is not None else budget):
        model = in_output(out, ref.reduced_path or ref.path) / "model.onnx"
        if model.is_file() and reaches(python, backend, target.package, model, mutant):
            result.outcome = "killed"
            result.kill_s = ref.found_s
            result.finding = ref.path
            result.reached_by = "reduced" if ref.reduced_path else "original"
            break
    if result.outcome != "killed" and kills:
        result.note = "a finding reached the function, but its reduced model did not"
    if result.outcome != "killed" and summary.support_changes is not None:
        result.dropped_reaches = dropped_reaching(python, backend, target.package, out, mutant)
    result.total_s = round(time.monotonic() - t0, 1)
    return result


# Orchestration ---------------------------------------------------------------------------


def load_draw(work: Path, target: str) -> list[Mutant]:
    rows = json.loads((work / f"draw-{target}.json").read_text())["mutants"]
    return [Mutant(**{**row, "span": tuple(row["span"])}) for row in rows]


def results(work: Path, target: str) -> list[dict[str, Any]]:
    path = work / f"results-{target}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_half(args: argparse.Namespace) -> None:
    """Each mutant of the half in order, every mode at once, until `--per-half` competent.
    A run stopped by SIGTERM still puts the unmutated source back (the `finally` below)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work: Path = args.work
    target = open_target(args.target, work, args.repo)
    rows = [r for r in results(work, args.target) if r.get("phase", "campaign") == "campaign"]
    done = {(r["mutant"], r["mode"]) for r in rows}
    competent = {r["mutant"] for r in rows if r["half"] == args.half and r["outcome"] != "incompetent"}
    modes = args.modes.split(",")
    only = set(args.only.split(",")) if args.only else None
    for mutant in (m for m in load_draw(work, args.target) if m.half == args.half and (only is None or m.id in only)):
        if len(competent) >= args.per_half:
            break
        if all((mutant.id, mode) in done for mode in modes):
            continue
        head = target.make_head(mutant)
        try:
            procs = {
                mode: subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "bench.mutants",
                        "campaign",
                        "--target",
                        args.target,
                        "--work",
                        str(work),
                        "--mutant",
                        mutant.id,
                        "--mode",
                        mode,
                        "--head",
                        head,
                        "--budget",
                        str(args.budget),
                    ],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
                for mode in modes
                if (mutant.id, mode) not in done
            }
            for mode, proc in procs.items():
                text, _ = proc.communicate()
                line = (
                    text.strip().splitlines()[-1]
                    if text.strip()
                    else json.dumps(
                        asdict(Result(mutant.id, mode, mutant.half, "error", note=f"exit {proc.returncode}"))
                    )
                )
                with open(work / f"results-{args.target}.jsonl", "a") as f:
                    f.write(line + "\n")
                print(line, file=sys.stderr, flush=True)
                if json.loads(line)["outcome"] != "incompetent":
                    competent.add(mutant.id)
        finally:
            target.restore()


def campaign_main(args: argparse.Namespace) -> None:
    work: Path = args.work
    mutant = next(m for m in load_draw(work, args.target) if m.id == args.mutant)
    target: Target = Onnx2Torch(work, None) if args.target == "onnx2torch" else TvmFrontend(work)
    try:
        result = run_campaign(target, mutant, args.mode, args.head, work, args.budget)
    except Exception as e:  # noqa: BLE001 - one mutant's failure is a line of the results, not the bench's end
        result = Result(mutant.id, args.mode, mutant.half, "error", note=f"{type(e).__name__}: {e}"[:300])
    print(json.dumps(asdict(result)), flush=True)


# Equivalence -----------------------------------------------------------------------------


OWN_TESTS_SHIM = """
import json, os, sys, types
import numpy as np
import onnx
import onnx.helper
from onnx import TensorProto as T

mapping = types.ModuleType("onnx.mapping")
mapping.NP_TYPE_TO_TENSOR_TYPE = {
    np.dtype(name): code
    for name, code in [
        ("float32", T.FLOAT), ("float64", T.DOUBLE), ("float16", T.FLOAT16), ("int8", T.INT8),
        ("int16", T.INT16), ("int32", T.INT32), ("int64", T.INT64), ("uint8", T.UINT8),
        ("uint16", T.UINT16), ("uint32", T.UINT32), ("uint64", T.UINT64), ("bool", T.BOOL),
        ("complex64", T.COMPLEX64), ("complex128", T.COMPLEX128),
    ]
}
sys.modules["onnx.mapping"] = onnx.mapping = mapping
_make_model = onnx.helper.make_model

def make_model(graph, **kwargs):
    model = _make_model(graph, **kwargs)
    model.ir_version = onnx.helper.find_min_ir_version_for(list(model.opset_import))
    return model

onnx.helper.make_model = make_model
sys.path.insert(0, PLUGIN_DIR)
import onnx2torch_backend
onnx2torch_backend._torchvision_or_stand_in()
sys.path.pop(0)
import pytest

class Record:
    def __init__(self):
        self.failed, self.ran, self.broken, self.prefix = set(), 0, 0, ""
        self.cov = None
        if COVER:
            import coverage
            self.cov = coverage.Coverage(data_file=COVER, source=["onnx2torch"])
            self.cov.start()

    def pytest_configure(self, config):
        where = os.path.relpath(config.rootpath)
        self.prefix = "" if where == "." else where + "/"

    def pytest_collectreport(self, report):
        self.broken += report.failed

    def pytest_runtest_setup(self, item):
        if self.cov is not None:
            self.cov.switch_context(self.prefix + item.nodeid)

    def pytest_runtest_logreport(self, report):
        self.ran += report.when == "call"
        if report.failed:
            self.failed.add(self.prefix + report.nodeid)

    def pytest_sessionfinish(self, session):
        if self.cov is not None:
            self.cov.stop()
            self.cov.save()
        with open(RESULT, "w") as f:
            json.dump({"failed": sorted(self.failed), "ran": self.ran, "broken": self.broken}, f)

args = ["-q", "-p", "no:cacheprovider"] + (SELECT if SELECT is not None else ["tests/node_converters"])
sys.exit(pytest.main(args, plugins=[Record()]))
"""
"""onnx2torch's own converter tests, run under today's onnx: its test helpers import
`onnx.mapping` (gone from onnx) and write models at onnx's newest IR version, which the
onnxruntime they compare against may not read. The shim puts back the one table they read
and writes each model at the lowest IR version its opsets need; the converter itself is
untouched. On base it also measures which of the package's lines each test runs (one
coverage context per test, named by its node id from the checkout's root, as pytest takes
it back), so a mutant runs only the tests that reach it."""


@dataclass
class OwnRun:
    """One run of the converter's own tests: the node ids that failed, and how many ran."""

    failed: set[str]
    ran: int


def run_own_tests(
    target: Onnx2Torch, ref: str, python: str, timeout_s: float, select: list[str] | None, cover: Path | None
) -> OwnRun | None:
    """onnx2torch's own converter tests at `ref` (`select`: these node ids alone; `cover`:
    where each test's coverage goes); None where the run cannot say (a collection error, a
    timeout, a crash)."""
    git(target.clone, "checkout", "-q", ref)
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        script = (
            f"PLUGIN_DIR = {str(PLUGIN.parent)!r}; RESULT = {str(result)!r}; SELECT = {select!r}; "
            f"COVER = {str(cover) if cover else None!r}" + OWN_TESTS_SHIM
        )
        try:
            done = subprocess.run([python, "-c", script], cwd=target.clone, capture_output=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        finally:
            git(target.clone, "checkout", "-q", target.base)
        if done.returncode not in (0, 1) or not result.is_file():
            return None
        got = json.loads(result.read_text())
        return None if got["broken"] else OwnRun(set(got["failed"]), got["ran"])


def base_own_tests(target: Onnx2Torch, work: Path, python: str, timeout_s: float) -> OwnRun | None:
    """Base's run of the whole suite, measured; kept in the work folder (`own-tests-base.json`
    and its coverage data), since a resumed search need not pay for it again."""
    record, cover = work / "own-tests-base.json", work / "own-tests-base.coverage"
    if record.is_file() and cover.is_file():
        got = json.loads(record.read_text())
        return OwnRun(set(got["failed"]), got["ran"])
    run = run_own_tests(target, target.base, python, timeout_s, None, cover)
    if run is not None:
        record.write_text(json.dumps({"failed": sorted(run.failed), "ran": run.ran}) + "\n")
    return run


def tests_reaching(cover: Path, mutant: Mutant) -> list[str]:
    """The tests that ran a line of the mutant's function on base: no other test can see it.
    A mutant at module level (a converter's registration) runs at import for every test
    alike, so it counts the tests that ran any line of its file."""
    import coverage

    data = coverage.CoverageData(str(cover))
    data.read()
    measured = next((f for f in data.measured_files() if f.endswith("/" + mutant.file)), None)
    if measured is None:
        return []
    first, last = mutant.span
    module = mutant.function == "<module>"
    by_line = data.contexts_by_lineno(measured)
    return sorted({c for line, cs in by_line.items() if module or first <= line <= last for c in cs if c})


def own_tests(
    target: Onnx2Torch, work: Path, head: str, mutant: Mutant, base: OwnRun | None, python: str, timeout_s: float
) -> tuple[list[str] | None, int]:
    """The tests that fail on the mutant and pass on base (the mutant is killed where there is
    one; None where either run cannot say), and how many ran on it: those that reach the
    mutant on base, less those base fails already, so one broken by the environment does not
    blind the rest."""
    if base is None:
        return None, 0
    selected = [t for t in tests_reaching(work / "own-tests-base.coverage", mutant) if t not in base.failed]
    if not selected:
        return [], 0
    run = run_own_tests(target, head, python, timeout_s, selected, None)
    return (None, 0) if run is None else (sorted(run.failed), run.ran)


def named_test_files(clone: Path, mutant: Mutant) -> list[str]:
    """The converter's own test file named for the mutated module (`node_converters/mean.py`:
    `tests/node_converters/mean_test.py`); none for a shared helper (`utils/dtype.py`)."""
    folder = clone / "tests" / "node_converters"
    return sorted(str(p.relative_to(clone)) for p in folder.glob(f"{Path(mutant.file).stem}_test.py"))


def own_tests_named(
    target: Onnx2Torch, head: str, mutant: Mutant, python: str, timeout_s: float
) -> tuple[list[str] | None, int]:
    """`own_tests` without base's whole measured suite: the test file named for the mutated
    module, run on base and on the mutant; a test failing on the mutant alone kills it."""
    selected = named_test_files(target.clone, mutant)
    if not selected:
        return [], 0
    base = run_own_tests(target, target.base, python, timeout_s, selected, None)
    run = run_own_tests(target, head, python, timeout_s, selected, None)
    if base is None or run is None:
        return None, 0
    return sorted(run.failed - base.failed), run.ran


def equiv(args: argparse.Namespace) -> None:
    """Survivors of the half (mode on): the converter's tests, then a long campaign. A mutant
    is equivalent only once both ran and neither told it apart; with the long campaign
    skipped (`--long-budget 0`), one the tests do not kill stays undecided."""
    work: Path = args.work
    target = open_target(args.target, work, args.repo)
    rows = results(work, args.target)
    judged = {r["mutant"] for r in rows if r.get("phase") == "equiv"}
    only = set(args.only.split(",")) if args.only else None
    survivors = [
        r["mutant"]
        for r in rows
        if r["mode"] == "on"
        and r["outcome"] == "survived"
        and r["half"] == args.half
        and (not only or r["mutant"] in only)
    ]
    by_id = {m.id: m for m in load_draw(work, args.target)}
    o2t = target if isinstance(target, Onnx2Torch) else None
    named = args.own_tests == "named"
    base = base_own_tests(o2t, work, args.tests_python, args.base_tests_timeout) if o2t and not named else None
    for mid in survivors:
        if mid in judged:
            continue
        mutant = by_id[mid]
        head = target.make_head(mutant)
        try:
            verdict: dict[str, Any] = {"mutant": mid, "mode": "on", "half": args.half, "phase": "equiv"}
            failed, ran = (None, 0)
            if o2t and named:
                failed, ran = own_tests_named(o2t, head, mutant, args.tests_python, args.tests_timeout)
                verdict["tests_selected"] = "named"
            elif o2t:
                failed, ran = own_tests(o2t, work, head, mutant, base, args.tests_python, args.tests_timeout)
                verdict["tests_selected"] = "covered"
            verdict["tests_kill"] = None if failed is None else bool(failed)
            verdict["tests_failing_on_base"] = None if base is None else len(base.failed)
            verdict["tests_ran"] = ran
            verdict["tests_failed"] = (failed or [])[:20]
            if not failed and args.long_budget > 0:
                long = run_campaign(target, mutant, "on", head, work, args.long_budget)
                verdict["long_campaign"] = long.outcome
                verdict["long_kill_s"] = long.kill_s
            verdict["outcome"] = equivalence(bool(failed), verdict.get("long_campaign"))
        finally:
            target.restore()
        with open(work / f"results-{args.target}.jsonl", "a") as f:
            f.write(json.dumps(verdict) + "\n")
        print(json.dumps(verdict), file=sys.stderr, flush=True)


def equivalence(tests_kill: bool, long_campaign: str | None) -> str:
    if tests_kill or long_campaign == "killed":
        return "not_equivalent"
    return "equivalent" if long_campaign == "survived" else "undecided"


# The report ------------------------------------------------------------------------------


def summarize(
    rows: list[dict[str, Any]], mutants: dict[str, Mutant], half: str, mode: str, classes: dict[str, Any]
) -> dict[str, Any]:
    campaign = [r for r in rows if r.get("phase", "campaign") == "campaign" and r["half"] == half and r["mode"] == mode]
    equivalent = {r["mutant"] for r in rows if r.get("phase") == "equiv" and r["outcome"] == "equivalent"}
    competent = [r for r in campaign if r["outcome"] in ("killed", "survived")]
    counted = [r for r in competent if r["mutant"] not in equivalent]
    killed = [r for r in counted if r["outcome"] == "killed"]
    rescored = {(r["mutant"], r["mode"]) for r in rows if r.get("phase") == "rescore" and r["dropped_reaches"]}
    dropped = [
        r
        for r in counted
        if r["outcome"] == "survived" and (r.get("dropped_reaches") or (r["mutant"], mode) in rescored)
    ]
    times = sorted(r["kill_s"] for r in killed if r["kill_s"] is not None)
    survivors: dict[str, list[str]] = {}
    for r in counted:
        if r["outcome"] == "survived":
            kind = classes.get(r["mutant"], {}).get("class", "unclassified")
            survivors.setdefault(kind, []).append(r["mutant"])
    return {
        "mutants": len(campaign),
        "incompetent": sum(1 for r in campaign if r["outcome"] == "incompetent"),
        "errors": sum(1 for r in campaign if r["outcome"] == "error"),
        "equivalent": len([r for r in competent if r["mutant"] in equivalent]),
        "non_equivalent": len(counted),
        "killed": len(killed),
        "kill_rate": round(len(killed) / len(counted), 3) if counted else None,
        "median_kill_s": round(statistics.median(times), 1) if times else None,
        "dropped_support_only": sum(1 for r in counted if r["outcome"] == "survived" and r.get("dropped_support")),
        "killed_or_dropped_reaching": len(killed) + len(dropped),
        "killed_or_dropped_rate": round((len(killed) + len(dropped)) / len(counted), 3) if counted else None,
        "survivors_by_class": {k: sorted(v) for k, v in sorted(survivors.items())},
        "tests_per_campaign": round(statistics.mean(r["tests"] for r in competent), 1) if competent else None,
    }


def report(args: argparse.Namespace) -> None:
    work: Path = args.work
    out: dict[str, Any] = {}
    for target in args.target.split(","):
        rows = results(work, target)
        mutants = {m.id: m for m in load_draw(work, target)}
        classes = json.loads(args.classes.read_text()) if args.classes else {}
        draw_info = json.loads((work / f"draw-{target}.json").read_text())
        out[target] = {"seed": draw_info["seed"], "population": draw_info["population"]}
        for half in HALVES:
            for mode in MODES:
                summary = summarize(rows, mutants, half, mode, classes)
                if summary["mutants"]:
                    out[target][f"{half}/{mode}"] = summary
    print(json.dumps(out, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("draw", "run", "campaign", "equiv", "rescore", "report"):
        p = sub.add_parser(name)
        p.add_argument("--target", required=True, help="onnx2torch or tvm (report: comma-separated)")
        p.add_argument("--work", type=Path, default=ROOT / ".cache" / "mutants")
        p.add_argument("--repo", type=Path, default=None, help="onnx2torch: a checkout of its repository")
    sub.choices["draw"].add_argument("--seed", type=int, default=20261129)
    sub.choices["draw"].add_argument("--count", type=int, default=120, help="mutants drawn (both halves)")
    for name in ("run", "campaign"):
        sub.choices[name].add_argument("--budget", type=float, default=300.0)
    sub.choices["run"].add_argument("--half", choices=HALVES, required=True)
    sub.choices["run"].add_argument("--per-half", type=int, default=20, help="competent mutants to run")
    sub.choices["run"].add_argument("--modes", default="on,off")
    for name in ("run", "equiv"):
        sub.choices[name].add_argument("--only", default="", help="these mutant ids alone (comma-separated)")
    sub.choices["campaign"].add_argument("--mutant", required=True)
    sub.choices["campaign"].add_argument("--mode", choices=MODES, required=True)
    sub.choices["campaign"].add_argument("--head", required=True)
    sub.choices["equiv"].add_argument("--half", choices=HALVES, required=True)
    sub.choices["equiv"].add_argument("--long-budget", type=float, default=1200.0)
    sub.choices["equiv"].add_argument("--tests-timeout", type=float, default=1200.0, help="a mutant's tests")
    sub.choices["equiv"].add_argument("--base-tests-timeout", type=float, default=3600.0, help="base's whole suite")
    sub.choices["equiv"].add_argument(
        "--own-tests",
        choices=("covered", "named"),
        default="covered",
        help="the tests that ran the mutant's lines on base (base's whole suite measured once), or the file named"
        " for its module (no whole-suite run)",
    )
    sub.choices["equiv"].add_argument(
        "--tests-python",
        default=sys.executable,
        help="the interpreter for onnx2torch's own tests: torch, onnxruntime, onnxscript (torch.onnx.export), pytest",
    )
    sub.choices["report"].add_argument("--classes", type=Path, default=None)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.command == "draw":
        target = open_target(args.target, args.work, args.repo)
        drawn = draw(args.target, target.source_root, args.seed, args.count)
        (args.work / f"draw-{args.target}.json").write_text(json.dumps(drawn, indent=1) + "\n")
        print(json.dumps({k: v for k, v in drawn.items() if k != "mutants"} | {"drawn": len(drawn["mutants"])}))
    elif args.command == "run":
        run_half(args)
    elif args.command == "campaign":
        campaign_main(args)
    elif args.command == "equiv":
        equiv(args)
    elif args.command == "rescore":
        rescore(args)
    else:
        report(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
