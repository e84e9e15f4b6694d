"""Rewrite coverage: which graph rewrites a compiler performs on the models a generator makes.

Most compiler bugs live where the optimizer rewrites a graph, so a generator is measured
by the rewrites it reaches, not only by the ops it emits. The models are `--count` models
of `--nodes` nodes from `fuzzbot gen`, the `.onnx` files of `--models DIR`, or those a
`--gen-cmd` writes (another generator's: NNSmith's, for one). Each is compiled through the
adapter a campaign drives (`compile`, then its `rewrites` hook), so the bench counts exactly
what a campaign counts into its coverage.

`--backend onnxruntime` (at `--level extended` unless told): the adapter compares the graph
onnxruntime saves after optimizing with the model given.

- `fused_types`: op types (with their domain) that a fusion made, such as
  `com.microsoft::FusedMatMul` or a `Gemm` made from MatMul+Add, with how many models got
  each; standard ops that appear from expanding a function op are listed apart;
- `rewritten_share`: the share of loaded models in which a fusion made at least one op;
- `removed`: nodes gone after optimization, by op type (eliminations and folding).

`--backend tvm` (at `--level default`): the fused functions of the built Relax VM program.
TVM names a function `fused_...` only for a group of two or more ops (a lone op keeps its own
name), so every `tvm::fused_*` key is a fusion:

- `fused_functions`: the most frequent fused functions, with how many models got each;
- `distinct_fused_functions`, and `rewritten_share`: models with at least one.

TVM compiles in seconds where onnxruntime takes a millisecond: use `--count 200` there.
The compiler runs in a child process (`--python`, this interpreter by default, with this
checkout put on its path), so a model that crashes it costs a restart and is counted, never
the bench. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent

BACKENDS = {
    "onnxruntime": ("backends.adapters.ort", "OrtAdapter", "extended"),
    "tvm": ("backends.adapters.tvm", "TvmAdapter", "default"),
}
"""--backend -> the adapter's module, class, and the level measured unless --level says."""

CHILD = r"""
import importlib, json, sys, time
sys.path.insert(0, sys.argv[1])
adapter = getattr(importlib.import_module(sys.argv[2]), sys.argv[3])({})
level = sys.argv[4]
for line in sys.stdin:
    try:
        with open(line.strip(), "rb") as f:
            model = f.read()
        t = time.perf_counter()
        if hasattr(adapter, "convert"):
            model = adapter.convert(model)
        compiled = adapter.compile(model, level)
        t1 = time.perf_counter()
        keys = adapter.rewrites(compiled)
        t2 = time.perf_counter()
        row = {"ok": True, "rewrites": keys, "compile_s": t1 - t, "rewrites_s": t2 - t1}
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
        cwd=REPO_ROOT,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"error: fuzzbot gen failed: {last}")
    return sorted(folder.glob("**/model.onnx"))


def run_generator(command: str, folder: Path) -> list[Path]:
    """The .onnx files a shell command writes into `{out}`."""
    if "{out}" not in command:
        raise SystemExit("error: --gen-cmd must name the output folder as {out}")
    done = subprocess.run(
        command.replace("{out}", shlex.quote(str(folder))), shell=True, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"error: --gen-cmd failed (exit {done.returncode}): {last}")
    return sorted(folder.glob("**/*.onnx"))


def optimized(paths: list[Path], python: str, backend: str, level: str) -> list[dict[str, Any]]:
    """One row per model; a child that dies is restarted after the model that killed it."""
    module, cls, _ = BACKENDS[backend]
    rows: list[dict[str, Any]] = []
    while len(rows) < len(paths):
        todo = paths[len(rows) :]
        child = subprocess.run(
            [python, "-c", CHILD, str(REPO_ROOT), module, cls, level],
            input="\n".join(str(p) for p in todo) + "\n",
            capture_output=True,
            text=True,
            check=False,
        )
        got = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
        rows += got
        if len(rows) < len(paths):
            if not got and child.returncode > 0:  # an exit status, not a signal: it never started
                last = (child.stderr.strip().splitlines() or ["no message"])[-1]
                raise SystemExit(f"error: the {backend} child exited with {child.returncode}: {last}")
            rows.append({"ok": False, "error": f"crash (exit {child.returncode})"})
    return rows


STANDARD_FUSION_RESULTS = {
    "ai.onnx::Gemm",
    "ai.onnx::LayerNormalization",
    "ai.onnx::QLinearConv",
    "ai.onnx::QLinearMatMul",
    "ai.onnx::SimplifiedLayerNormalization",
    "ai.onnx::Split",
}
"""Standard-domain ops onnxruntime makes by fusing others (MatMul+Add or MatMul+BatchNorm,
the LayerNorm subgraphs, Gathers covering an axis into a Split, DQ -> MatMul or Conv -> Q
into its QLinear form; SimplifiedLayerNormalization
is onnxruntime's own op, registered in the default domain; no function op of the opset
expands into any of them); any other standard op that appears comes from expanding a
function op (HardSwish into HardSigmoid and Mul, CastLike into Cast), which is not a fusion."""


def is_fusion(op: str) -> bool:
    return not op.startswith("ai.onnx::") or op in STANDARD_FUSION_RESULTS


def _common(rows: list[dict[str, Any]]) -> dict[str, Any]:
    loaded = [r for r in rows if r["ok"]]
    n = max(len(loaded), 1)
    return {
        "models": len(rows),
        "loaded": len(loaded),
        "failed": dict(Counter(r["error"] for r in rows if not r["ok"])),
        "compile_ms_mean": round(sum(r["compile_s"] for r in loaded) / n * 1000, 3),
        "rewrites_ms_mean": round(sum(r["rewrites_s"] for r in loaded) / n * 1000, 3),
    }


def describe(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """onnxruntime's `+`/`-` keys: what fusions made, what expansions made, what went."""
    loaded = [r for r in rows if r["ok"]]
    fused: Counter[str] = Counter()
    inlined: Counter[str] = Counter()
    removed: Counter[str] = Counter()
    rewritten = 0
    for r in loaded:
        keys: dict[str, int] = r["rewrites"]
        made = [k[1:] for k in keys if k.startswith("+")]
        fused.update(op for op in made if is_fusion(op))
        inlined.update(op for op in made if not is_fusion(op))
        rewritten += any(is_fusion(op) for op in made)
        removed.update({k[1:]: v for k, v in keys.items() if k.startswith("-")})
    return {
        **_common(rows),
        "rewritten_share": round(rewritten / max(len(loaded), 1), 4),
        "distinct_fused_types": len(fused),
        "fused_types": dict(fused.most_common()),
        "from_function_expansion": dict(inlined.most_common()),
        "removed": dict(removed.most_common()),
    }


TOP_FUSED = 30


def describe_tvm(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """TVM's `tvm::fused_*` keys: which fused functions, in how many models."""
    loaded = [r for r in rows if r["ok"]]
    fused: Counter[str] = Counter()
    for r in loaded:
        fused.update(k.removeprefix("tvm::") for k in r["rewrites"] if k.startswith("tvm::fused_"))
    rewritten = sum(any(k.startswith("tvm::fused_") for k in r["rewrites"]) for r in loaded)
    return {
        **_common(rows),
        "rewritten_share": round(rewritten / max(len(loaded), 1), 4),
        "distinct_fused_functions": len(fused),
        "fused_functions": dict(fused.most_common(TOP_FUSED)),
    }


def models(args: argparse.Namespace, tmp: Path) -> tuple[list[Path], dict[str, Any]]:
    """The models to measure, and where they came from (for the JSON)."""
    if args.models is not None:
        paths = sorted(args.models.glob("**/*.onnx"))
        if not paths:
            raise SystemExit(f"error: {args.models}: no .onnx file in it")
        return paths, {"models_from": str(args.models)}
    if args.gen_cmd is not None:
        paths = run_generator(args.gen_cmd, tmp)
        if not paths:
            raise SystemExit("error: --gen-cmd wrote no .onnx file into {out}")
        return paths, {"models_from": args.gen_cmd}
    return generate(args.count, args.nodes, tmp), {"nodes": args.nodes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="onnxruntime")
    parser.add_argument("--level", help="the adapter's level [onnxruntime: extended, tvm: default]")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=10)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--models", type=Path, help="measure these .onnx files instead of generating")
    source.add_argument("--gen-cmd", help='a shell command that writes .onnx files into {out}, e.g. "gen.sh {out}"')
    parser.add_argument("--python", default=sys.executable, help="an interpreter with the backend installed")
    args = parser.parse_args()
    level = args.level or BACKENDS[args.backend][2]
    with tempfile.TemporaryDirectory(prefix="fuzzbot-rewrites-") as tmp:
        paths, where = models(args, Path(tmp))
        rows = optimized(paths, args.python, args.backend, level)
        measured = describe(rows) if args.backend == "onnxruntime" else describe_tvm(rows)
        print(json.dumps({"backend": args.backend, "level": level, **where, **measured}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
