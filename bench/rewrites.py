"""Rewrite coverage: which graph rewrites onnxruntime performs on the models a generator makes.

Most compiler bugs live where the optimizer rewrites a graph, so a generator is measured
by the rewrites it reaches, not only by the ops it emits. For `--count` models of
`--nodes` nodes from `fuzzbot gen` (or the `.onnx` files of `--models DIR`, another
generator's, NNSmith's for one), onnxruntime at ENABLE_EXTENDED saves the optimized graph
(`SessionOptions.optimized_model_filepath`), and it is compared with the input:

- `fused_types`: op types (with their domain) that a fusion made, such as
  `com.microsoft::FusedMatMul` or a `Gemm` made from MatMul+Add, with how many models got
  each; standard ops that appear from expanding a function op are listed apart;
- `rewritten_share`: the share of loaded models in which a fusion made at least one op;
- `removed`: nodes gone after optimization, by op type (eliminations and folding).

onnxruntime runs in a child process (`--python`, this interpreter by default), so a model
that crashes it costs a restart and is counted, never the bench. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

CHILD = r"""
import json, sys, tempfile, collections, onnx, onnxruntime as ort
def types(m):
    return collections.Counter((n.domain or "ai.onnx") + "::" + n.op_type for n in m.graph.node)
for line in sys.stdin:
    path = line.strip()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            so.optimized_model_filepath = tmp + "/opt.onnx"
            ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
            after = types(onnx.load(tmp + "/opt.onnx"))
        row = {"ok": True, "before": types(onnx.load(path)), "after": after}
    except Exception as e:
        row = {"ok": False, "error": type(e).__name__}
    print(json.dumps(row), flush=True)
"""


def generate(count: int, nodes: int, folder: Path) -> list[Path]:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "gen", "--count", str(count), "--nodes", str(nodes), "--out", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"error: fuzzbot gen failed: {done.stderr.strip().splitlines()[-1:]}")
    return sorted(folder.glob("**/model.onnx"))


def optimized(paths: list[Path], python: str) -> list[dict[str, Any]]:
    """One row per model; a child that dies is restarted after the model that killed it."""
    rows: list[dict[str, Any]] = []
    while len(rows) < len(paths):
        todo = paths[len(rows) :]
        child = subprocess.run(
            [python, "-c", CHILD],
            input="\n".join(str(p) for p in todo) + "\n",
            capture_output=True,
            text=True,
            check=False,
        )
        got = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
        rows += got
        if len(rows) < len(paths):
            rows.append({"ok": False, "error": f"crash (exit {child.returncode})"})
    return rows


STANDARD_FUSION_RESULTS = {"ai.onnx::Gemm", "ai.onnx::LayerNormalization"}
"""Standard ops onnxruntime makes by fusing others (MatMul+Add, the LayerNorm subgraph); any
other standard op that appears comes from expanding a function op (HardSwish into
HardSigmoid and Mul, CastLike into Cast), which is not a fusion."""


def is_fusion(op: str) -> bool:
    return not op.startswith("ai.onnx::") or op in STANDARD_FUSION_RESULTS


def describe(rows: list[dict[str, Any]]) -> dict[str, Any]:
    loaded = [r for r in rows if r["ok"]]
    fused: Counter[str] = Counter()
    inlined: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    rewritten = 0
    for r in loaded:
        before, after = Counter(r["before"]), Counter(r["after"])
        new = set(after) - set(before)
        fused.update(op for op in new if is_fusion(op))
        inlined.update(op for op in new if not is_fusion(op))
        rewritten += any(is_fusion(op) for op in new)
        removed.update(before - after)
    return {
        "models": len(rows),
        "loaded": len(loaded),
        "failed": dict(Counter(r["error"] for r in rows if not r["ok"])),
        "rewritten_share": round(rewritten / max(len(loaded), 1), 4),
        "distinct_fused_types": len(fused),
        "fused_types": dict(fused.most_common()),
        "from_function_expansion": dict(inlined.most_common()),
        "removed": dict(removed.most_common()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--models", type=Path, help="measure these .onnx files instead of generating")
    parser.add_argument("--python", default=sys.executable, help="an interpreter with onnxruntime and onnx")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuzzbot-rewrites-") as tmp:
        if args.models is not None:
            paths = sorted(args.models.glob("**/*.onnx"))
            if not paths:
                raise SystemExit(f"error: {args.models}: no .onnx file in it")
        else:
            paths = generate(args.count, args.nodes, Path(tmp))
        source = {"models_from": str(args.models)} if args.models is not None else {"nodes": args.nodes}
        print(json.dumps({**source, **describe(optimized(paths, args.python))}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
