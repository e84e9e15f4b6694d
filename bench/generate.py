"""Generator benchmark: speed per node count, validity on onnxruntime, op reach, and the
op-pair coverage that diversity feedback buys over uniform choice.

Prints one JSON object. Timings are generation plus ONNX emission, as wall time and
as this process's CPU time (the steadier number on a shared machine), without the values
(`timing`, comparable with NNSmith's graph generation: bench/nnsmith_gen.py, run in its
own venv, see its docstring) and with them, as a campaign generates (`timing_with_values`;
the values have their own benchmark, bench/values.py). Validity runs each model through
onnx.checker (full_check), the torch reference, and onnxruntime in a worker after
support probing, exactly as a campaign would.

    python bench/generate.py [--count 200] [--valid 300] [--pairs 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.client import WorkerClient
from backends.reference import ReferenceError, run_reference
from backends.results import Status
from backends.spec import parse_backend
from bot.sides.probe import probe_support
from generator.api import GenConfig, Support, generate, op_specs
from generator.coverage import Coverage
from generator.values import NoValidValues
from generator.z3_contexts import ContextSupply


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def timing(nodes: int, count: int, values: Literal["gradient", "none"] = "none") -> dict[str, float]:
    cfg = GenConfig(nodes=nodes, values=values)
    coverage, contexts = Coverage(), ContextSupply()  # as a campaign's lane has them
    times: list[float] = []
    cpu: list[float] = []
    sizes: list[int] = []
    for seed in range(count):
        t0, c0 = time.perf_counter(), time.process_time()
        case = generate(seed, cfg, coverage=coverage, contexts=contexts)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        sizes.append(len(case.model.graph.node))
    return {
        "median_ms": round(statistics.median(times), 2),
        "p90_ms": round(percentile(times, 90), 2),
        "median_cpu_ms": round(statistics.median(cpu), 2),
        "mean_onnx_nodes": round(statistics.mean(sizes), 1),
    }


def pair_coverage(
    count: int, nodes: int, feedback: bool, values: Literal["gradient", "none"] = "none"
) -> dict[str, int]:
    cfg = GenConfig(nodes=nodes, values=values, feedback=feedback)
    coverage = Coverage()
    for seed in range(count):
        generate(seed, cfg, coverage=coverage)
    st = coverage.stats()
    return {"op_pairs": st.op_pairs, "op_inputs": st.op_inputs, "attr_values": st.attr_values, "op_types": st.op_types}


def validity(count: int, nodes: int) -> dict[str, Any]:
    """A model is valid when onnxruntime runs it with its optimizer off; one that then fails
    with the optimizer on (`all`) is an optimizer bug the templates reached, counted apart
    (`optimizer_failures`), not an invalid model."""
    with (
        WorkerClient(parse_backend("onnxruntime:disable")) as client,
        WorkerClient(parse_backend("onnxruntime:all")) as optimizing,
        tempfile.TemporaryDirectory() as cache,
    ):
        assert client.info is not None
        failures: list[str] = []
        matrix = probe_support(client, client.info, 17, Path(cache), lambda f: failures.append(f"{f.op}/{f.dtype}"))
        support: Support = matrix.support()
        return _run_valid(client, optimizing, support, count, nodes) | {"probe_unexpected": failures}


def _run_valid(
    client: WorkerClient, optimizing: WorkerClient, support: Support, count: int, nodes: int
) -> dict[str, Any]:
    cfg = GenConfig(nodes=nodes)
    coverage = Coverage()
    emitted = checked = referenced = ran = dropped = 0
    errors: list[str] = []
    optimizer: list[str] = []
    for seed in range(count):
        try:
            case = generate(seed, cfg, support=support, coverage=coverage)
        except NoValidValues:
            dropped += 1
            continue
        emitted += 1
        try:
            onnx.checker.check_model(case.model, full_check=True)
            checked += 1
            run_reference(case.model, case.inputs)
            referenced += 1
        except (onnx.checker.ValidationError, ReferenceError) as e:
            errors.append(f"seed {seed}: {str(e).splitlines()[0][:160]}")
            continue
        client.submit(case.model.SerializeToString(), case.inputs)
        result = client.collect()
        if result.status is not Status.ok:
            errors.append(f"seed {seed}: ort {result.status.value}: {result.message.splitlines()[0][:160]}")
            continue
        ran += 1
        optimizing.submit(case.model.SerializeToString(), case.inputs)
        optimized = optimizing.collect()
        if optimized.status is not Status.ok:
            optimizer.append(f"seed {seed}: {optimized.message.splitlines()[0][-160:]}")
    return {
        "models": emitted,
        "dropped_no_valid_values": dropped,
        "check_model_rate": round(checked / max(emitted, 1), 4),
        "reference_rate": round(referenced / max(emitted, 1), 4),
        "onnxruntime_rate": round(ran / max(emitted, 1), 4),
        "distinct_op_types": len(coverage.ops),
        "first_errors": errors[:8],
        "optimizer_failures": len(optimizer),
        "first_optimizer_failures": optimizer[:8],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200, help="models per node count for timing")
    ap.add_argument("--valid", type=int, default=300, help="models for the validity run")
    ap.add_argument("--pairs", type=int, default=1000, help="models for the pair-coverage comparison")
    args = ap.parse_args()
    out: dict[str, Any] = {"registered_op_types": len(op_specs())}
    out["timing"] = {str(n): timing(n, args.count) for n in (5, 10, 20, 30)}
    out["timing_with_values"] = {str(n): timing(n, args.count, "gradient") for n in (10, 20, 30)}
    on, off = pair_coverage(args.pairs, 10, True), pair_coverage(args.pairs, 10, False)
    valued = pair_coverage(args.pairs, 10, True, "gradient")
    out["pair_coverage_10_nodes"] = {
        "models": args.pairs,
        "feedback": on,
        "uniform": off,
        "pair_ratio": round(on["op_pairs"] / max(off["op_pairs"], 1), 3),
        "feedback_with_values": valued,
    }
    out["validity_10_nodes"] = validity(args.valid, 10)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
