"""NNSmith's graph-generation speed: the baseline that bench/generate.py is compared against.

fuzzbot claims to generate models at least 2x faster than NNSmith on the same machine;
this script measures the NNSmith side. It times what NNSmith 0.1.0's
`nnsmith.model_gen` CLI does for `model.type=onnx` before materialization: symbolic graph
growth with z3 (`graph_gen.model_gen`, method "symbolic-cinit", the CLI defaults
max_elem_per_tensor=65536 and timeout_ms=10000) plus concretization (`make_concrete`).
Weights, the oracle and the ONNX export are not timed. NNSmith 0.1.0 has no attribute
binning, so none is measured. The op set is the CLI's: `auto_opset` of the ONNX model
type, i.e. the torch-dialect ops whose single-op models export, computed afresh in a
temporary cache on each run. torch 2.13 exports through dynamo/onnxscript by default,
which nnsmith 0.1.0 predates, so that one-off op-set check runs the TorchScript exporter
(`dynamo=False`); the timed path touches torch only through the CLI's seed setter.

It imports nothing from fuzzbot and runs in its own venv, outside the repo:

    python3.11 -m venv /tmp/nnsmith-venv
    /tmp/nnsmith-venv/bin/pip install nnsmith==0.1.0 z3-solver==5.4.0.0 torch==2.13.0 \
        onnx==1.23.2 numpy==2.4.6 hydra-core==1.3.8 hydra-colorlog==1.2.0 \
        multipledispatch==1.0.0 appdirs==1.4.4
    /tmp/nnsmith-venv/bin/python bench/nnsmith_gen.py [--count 200]

Prints one JSON object. p90 uses numpy's linear percentile, as bench/generate.py does.
With `--export DIR` it writes NNSmith's models as ONNX files instead, for
`bench/rewrites.py --gen-cmd` (the rewrites a generator's models reach).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib.metadata import version
from typing import Any, cast

import numpy as np

NODES = (5, 10, 20, 30)


@contextlib.contextmanager
def torchscript_export() -> Iterator[None]:
    """Make `torch.onnx.export` use the TorchScript exporter that nnsmith 0.1.0 was written for."""
    import torch.onnx

    onnx_mod = cast(Any, torch.onnx)
    original = onnx_mod.export
    onnx_mod.export = functools.partial(original, dynamo=False)
    try:
        yield
    finally:
        onnx_mod.export = original


def onnx_opset() -> tuple[list[Any], list[str]]:
    """The op set `nnsmith.model_gen model.type=onnx` uses (no backend, vulops off), and the ops left out."""
    from nnsmith.abstract.extension import activate_ext  # type: ignore[import-not-found]
    from nnsmith.materialize import Model  # type: ignore[import-not-found]
    from nnsmith.narrow_spec import auto_opset  # type: ignore[import-not-found]
    from nnsmith.util import set_seed  # type: ignore[import-not-found]

    model_type = Model.init("onnx", backend_target="cpu")
    model_type.add_seed_setter()  # the CLI seeds torch too on every generation
    # The export check draws random shapes; under z3 5.4 its Reshape case fails, or crashes
    # auto_opset, for some seeds (a single-op test artifact: generation constrains shapes > 0).
    # Seed 1 keeps Reshape, so the set is every non-limit_domain op, as NNSmith intends.
    set_seed(1)
    with torchscript_export():
        opset: list[Any] = auto_opset(model_type, None, vulops=False)
    activate_ext(opset=opset, factory=None)
    kept = {op.name() for op in opset}
    return opset, sorted(op.name() for op in model_type.operators() if op.name() not in kept)


def grown(opset: list[Any], nodes: int, seed: int, timeout_ms: int) -> Any:
    """One concrete graph, as the CLI grows it."""
    from nnsmith.graph_gen import model_gen  # type: ignore[import-not-found]

    gen = model_gen(
        opset=opset,
        method="symbolic-cinit",
        seed=seed,
        max_elem_per_tensor=2**16,
        max_nodes=nodes,
        timeout_ms=timeout_ms,
        rank_choices=None,
        dtype_choices=None,
    )
    return gen.make_concrete()


def generate(
    opset: list[Any], nodes: int, seed: int, timeout_ms: int, dump: Callable[[Any, int], bool] | None = None
) -> tuple[float, float, int]:
    """One graph: (wall ms, process CPU ms, compute ops in it); with `dump`, its ONNX export
    is timed too (a ready-to-run model, what `--with-export` compares with fuzzbot's case)."""

    t0, c0 = time.perf_counter(), time.process_time()
    ir = grown(opset, nodes, seed, timeout_ms)
    if dump is not None:
        dump(ir, seed)
    ms, cpu_ms = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
    return ms, cpu_ms, int(ir.n_compute_inst())


def exporter(folder: str) -> Callable[[Any, int], bool]:
    """NNSmith's CLI materialization (`Model.from_gir`, then `dump`) into `folder`; an export
    NNSmith itself fails is skipped (False), as its CLI would."""
    from nnsmith.materialize import Model

    model_type = Model.init("onnx", backend_target="cpu")

    def dump(ir: Any, seed: int) -> bool:
        with contextlib.suppress(Exception), torchscript_export():
            model_type.from_gir(ir).dump(os.path.join(folder, f"nnsmith-{seed}.onnx"))
            return True
        return False

    return dump


def measure(
    opset: list[Any], nodes: int, count: int, first_seed: int, timeout_ms: int, folder: str | None = None
) -> dict[str, Any]:
    times: list[float] = []
    cpu: list[float] = []
    sizes: list[int] = []
    dump = exporter(folder) if folder is not None else None
    for seed in range(first_seed, first_seed + count):
        ms, cpu_ms, n = generate(opset, nodes, seed, timeout_ms, dump)
        times.append(ms)
        cpu.append(cpu_ms)
        sizes.append(n)
    return {
        "median_ms": round(statistics.median(times), 2),
        "p90_ms": round(float(np.percentile(times, 90)), 2),
        "mean_ms": round(statistics.mean(times), 2),
        "max_ms": round(max(times), 2),
        "median_cpu_ms": round(statistics.median(cpu), 2),  # less sensitive to a busy machine
        "mean_nodes": round(statistics.mean(sizes), 2),
        "short": sum(n < nodes for n in sizes),  # stopped before max_nodes (timeout)
    }


def export(opset: list[Any], nodes: int, count: int, first_seed: int, timeout_ms: int, folder: str) -> int:
    """NNSmith's models as `.onnx` files in `folder`: the input bench/rewrites.py's
    `--gen-cmd` reads."""
    dump = exporter(folder)
    return sum(dump(grown(opset, nodes, seed, timeout_ms), seed) for seed in range(first_seed, first_seed + count))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200, help="models per node count")
    parser.add_argument("--nodes", type=int, nargs="+", default=list(NODES), help="max_nodes values")
    parser.add_argument("--seed", type=int, default=0, help="first seed; model i uses seed+i")
    parser.add_argument("--timeout-ms", type=int, default=10000, help="NNSmith's per-model budget (CLI default)")
    parser.add_argument("--export", metavar="DIR", help="write --count models of the first --nodes as .onnx files here")
    parser.add_argument("--with-export", action="store_true", help="time each model's ONNX export with its growth")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache  # nnsmith caches the op set; never reuse a stale one
        opset, excluded = onnx_opset()
        if args.export:
            written = export(opset, args.nodes[0], args.count, args.seed, args.timeout_ms, args.export)
            print(json.dumps({"exported": written, "count": args.count, "nodes": args.nodes[0]}))
            return 0
        generate(opset, 5, args.seed, args.timeout_ms)  # warm-up, untimed
        folder = tempfile.mkdtemp(dir=cache) if args.with_export else None
        if folder is not None:
            generate(opset, 5, args.seed, args.timeout_ms, exporter(folder))  # the exporter's warm-up
        per_nodes = {str(n): measure(opset, n, args.count, args.seed, args.timeout_ms, folder) for n in args.nodes}

    result = {
        "nnsmith_version": version("nnsmith"),
        "z3_version": version("z3-solver"),
        "method": "symbolic-cinit",
        "binning": False,
        "opset_size": len(opset),
        "opset_excluded": excluded,
        "count": args.count,
        "timeout_ms": args.timeout_ms,
        "with_export": args.with_export,
        "per_nodes": per_nodes,
    }
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
