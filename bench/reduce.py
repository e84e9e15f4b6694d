"""Reducer benchmark: fuzzbot's reducer against `polygraphy debug reduce` (bisect and
linear) on the same failing models and the same external check.

The corpus: generated models of 10, 20 and 40 nodes (branchy, several outputs) that
run on onnxruntime, each with a planted trigger spliced into the middle of the graph:
either the edge Sigmoid -> Softsign, or a LeakyRelu with alpha=0.125. The check script
(CHECK_SCRIPT, run as a subprocess per check by every tool) exits 1 while the trigger
is present and the model still runs on onnxruntime, so the planted minimum is the
trigger's node count (2 or 1). Checks are counted by the script itself, so the count is
what each tool really ran. Headline fuzzbot numbers use the same subprocess check as
polygraphy; `--in-process` adds a run with the check as a Python function.

Polygraphy lives in its own venv (never in requirements.txt):

    python3 -m venv /tmp/polygraphy-venv
    /tmp/polygraphy-venv/bin/pip install polygraphy onnx-graphsurgeon onnx==1.23.2 onnxruntime==1.31.1

It is found as $POLYGRAPHY, /tmp/polygraphy-venv/bin/polygraphy, or on PATH; when it is
missing those rows are skipped with a note. Prints one JSON object:

    python bench/reduce.py [--per-size 7] [--jobs 2] [--tools fuzzbot,fuzzbot-nodes,bisect,linear] [--in-process]

Tools: `fuzzbot` is the full default pipeline (node removal, then the polish passes:
initializers, attributes, shapes, names), `fuzzbot-nodes` only the node-removing passes,
which is the scope of polygraphy's reduce. Tools run interleaved, model by model.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from generator.api import GenConfig, generate
from reducers.candidate import Candidate, tensor_types
from reducers.driver import reduce_case
from reducers.passes import POLISH_PASSES, STRUCTURAL_PASSES
from reducers.tester import ReduceConfig

SIZES = (10, 20, 40)
PAIR = ("Sigmoid", "Softsign")
ATTR = ("LeakyRelu", "alpha", 0.125)

CHECK_SCRIPT = '''
"""Exit 1 (still failing) while MODEL has the planted trigger and runs on onnxruntime."""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper

def has_trigger(model, kind):
    nodes = model.graph.node
    if kind == "pair":
        made = {o: n.op_type for n in nodes for o in n.output}
        return any(n.op_type == "Softsign" and made.get(i) == "Sigmoid" for n in nodes for i in n.input)
    return any(
        n.op_type == "LeakyRelu" and any(a.name == "alpha" and abs(a.f - 0.125) < 1e-9 for a in n.attribute)
        for n in nodes
    )

def runs(model):
    rng = np.random.default_rng(0)
    inits = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        t = vi.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(t.elem_type)
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim]
        value = rng.standard_normal(shape) if np.dtype(dtype).kind == "f" else np.zeros(shape)
        feeds[vi.name] = np.asarray(value).astype(dtype)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        session = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    except Exception:
        return False
    return True

def main():
    counter = os.environ.get("REDUCE_BENCH_COUNTER")
    if counter:
        with open(counter, "a") as f:
            f.write("1\\n")
    try:
        model = onnx.load(sys.argv[1])
    except Exception:
        return 0
    return 1 if has_trigger(model, sys.argv[2]) and runs(model) else 0

if __name__ == "__main__":
    sys.exit(main())
'''


@dataclass
class Planted:
    name: str
    model: onnx.ModelProto
    kind: str
    minimum: int


def plant(model: onnx.ModelProto, kind: str) -> onnx.ModelProto | None:
    """`model` with the trigger spliced in front of a mid-graph float32 operand."""
    types = tensor_types(model)
    g = model.graph
    slots = [
        (i, j, name)
        for i, n in enumerate(g.node)
        for j, name in enumerate(n.input)
        if name and name in types and types[name].tensor_type.elem_type == TensorProto.FLOAT
    ]
    if not slots:
        return None
    i, j, tensor = slots[len(slots) // 2]
    if kind == "pair":
        new = [
            helper.make_node(PAIR[0], [tensor], ["planted_a"], name="planted_a"),
            helper.make_node(PAIR[1], ["planted_a"], ["planted_b"], name="planted_b"),
        ]
    else:
        new = [helper.make_node(ATTR[0], [tensor], ["planted_b"], name="planted_b", alpha=ATTR[2])]
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node[i].input[j] = "planted_b"
    nodes = list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend([*nodes[:i], *new, *nodes[i:]])
    return m


def in_process_check(kind: str) -> Any:
    """The check script's logic as a function (for the in-process numbers and the tests)."""
    scope: dict[str, Any] = {"__name__": "bench_check"}
    exec(compile(CHECK_SCRIPT, "check.py", "exec"), scope)
    return lambda model: bool(scope["has_trigger"](model, kind) and scope["runs"](model))


def corpus(per_size: int) -> list[Planted]:
    """Deterministic: the first `per_size` seeds per size that generate, run, and take a trigger."""
    out: list[Planted] = []
    checks = {k: in_process_check(k) for k in ("pair", "attr")}
    for nodes in SIZES:
        seed, found = 0, 0
        while found < per_size and seed < 500:
            seed += 1
            kind = "pair" if found % 2 == 0 else "attr"
            try:
                case = generate(seed, GenConfig(nodes=nodes, values="none"))
            except (ValueError, RuntimeError):
                continue
            planted = plant(case.model, kind)
            if planted is None or not checks[kind](planted):
                continue
            out.append(Planted(f"n{nodes}-s{seed}-{kind}", planted, kind, 2 if kind == "pair" else 1))
            found += 1
    return out


def _count(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def run_fuzzbot(p: Planted, work: Path, check: str, jobs: int, nodes_only: bool = False) -> dict[str, Any]:
    """fuzzbot's reducer with the same subprocess check as polygraphy. `nodes_only` runs
    just the node-removing passes (what polygraphy does), without the polish passes."""
    from bot.reduce.candidates import ExternalCheck

    counter = work / "count"
    os.environ["REDUCE_BENCH_COUNTER"] = str(counter)
    ext = ExternalCheck(f"{sys.executable} {check} {{model}} {p.kind}")
    phases = (STRUCTURAL_PASSES,) if nodes_only else (STRUCTURAL_PASSES, POLISH_PASSES)
    t0 = time.perf_counter()
    try:
        reduced, result = reduce_case(
            Candidate(p.model), ext.holds, ReduceConfig(jobs=jobs, budget_s=600), phases=phases
        )
    finally:
        ext.close()
    wall = time.perf_counter() - t0
    return {"nodes": reduced.size, "checks": _count(counter), "wall_s": wall, "cache_hits": result.stats.cache_hits}


def run_in_process(p: Planted, jobs: int) -> dict[str, Any]:
    check = in_process_check(p.kind)
    t0 = time.perf_counter()
    reduced, result = reduce_case(Candidate(p.model), lambda c: check(c.model), ReduceConfig(jobs=jobs))
    return {"nodes": reduced.size, "checks": result.stats.tests, "wall_s": time.perf_counter() - t0}


def run_polygraphy(exe: str, mode: str, p: Planted, work: Path, check: str) -> dict[str, Any]:
    counter = work / "count"
    src, dst = work / "model.onnx", work / "reduced.onnx"
    onnx.save(p.model, str(src))
    cmd = [exe, "debug", "reduce", str(src), "-o", str(dst), f"--mode={mode}", "--check", sys.executable, check]
    cmd += ["polygraphy_debug.onnx", p.kind]
    env = {**os.environ, "REDUCE_BENCH_COUNTER": str(counter)}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900, check=False)
    wall = time.perf_counter() - t0
    nodes = len(onnx.load(str(dst)).graph.node) if dst.exists() else len(p.model.graph.node)
    row: dict[str, Any] = {"nodes": nodes, "checks": _count(counter), "wall_s": wall}
    if not dst.exists():
        row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
    return row


def summarize(rows: list[dict[str, Any]], corpus_: list[Planted]) -> dict[str, Any]:
    minimal = [r["nodes"] == p.minimum for r, p in zip(rows, corpus_, strict=True)]
    checks = [r["checks"] for r in rows]
    walls = [r["wall_s"] for r in rows]
    return {
        "minimal_share": round(sum(minimal) / len(rows), 3),
        "checks_median": statistics.median(checks),
        "checks_mean": round(statistics.mean(checks), 1),
        "checks_total": sum(checks),
        "wall_median_s": round(statistics.median(walls), 2),
        "wall_total_s": round(sum(walls), 1),
    }


def polygraphy_exe() -> str | None:
    for cand in (os.environ.get("POLYGRAPHY"), "/tmp/polygraphy-venv/bin/polygraphy", shutil.which("polygraphy")):
        if cand and Path(cand).exists():
            return cand
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--per-size", type=int, default=7)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tools", default="fuzzbot,fuzzbot-nodes,bisect,linear")
    ap.add_argument("--in-process", action="store_true")
    args = ap.parse_args()
    models = corpus(args.per_size)
    tools = args.tools.split(",")
    exe = polygraphy_exe()
    out: dict[str, Any] = {"models": len(models), "sizes": list(SIZES), "jobs": args.jobs, "tools": {}, "notes": []}
    if exe is None and ({"bisect", "linear"} & set(tools)):
        out["notes"].append("polygraphy not found: bisect/linear skipped (see the docstring to install it)")
        tools = [t for t in tools if t.startswith("fuzzbot")]
    per_model: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
    with tempfile.TemporaryDirectory(prefix="reduce-bench-") as tmp:
        check = Path(tmp) / "check.py"
        check.write_text(CHECK_SCRIPT)
        for k, p in enumerate(models):  # tools interleaved per model, so machine load drifts hit all alike
            for tool in tools:
                work = Path(tmp) / f"{tool}-{k}"
                work.mkdir()
                if tool.startswith("fuzzbot"):
                    row = run_fuzzbot(p, work, str(check), args.jobs, nodes_only=tool == "fuzzbot-nodes")
                else:
                    assert exe is not None
                    row = run_polygraphy(exe, tool, p, work, str(check))
                per_model[tool].append(row)
                print(f"{tool} {p.name}: {row}", file=sys.stderr, flush=True)
        for tool, rows in per_model.items():
            out["tools"][tool if tool.startswith("fuzzbot") else f"polygraphy-{tool}"] = summarize(rows, models)
        if args.in_process:
            rows = [run_in_process(p, args.jobs) for p in models]
            out["tools"]["fuzzbot-in-process"] = summarize(rows, models)
    out["per_model"] = {
        t: [{"model": p.name, **r} for p, r in zip(models, rows, strict=True)] for t, rows in per_model.items()
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
