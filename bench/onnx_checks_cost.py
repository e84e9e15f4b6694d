"""What asking onnx's checker and shape inference in a helper process costs
(generator.onnx_checks), against asking them in the bot's own process.

Generates `--models` cases as a campaign does, then asks of each model what generation and
the reducer ask of every model they make: strict shape inference with data propagation, then
the full checker. Timed three ways, each over every model once: in-process onnx, the helper
on models it has not seen, and the helper again (its cache). Prints JSON: milliseconds per
model each way, and the helper's cost as a share of the in-process time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable

import onnx

from generator import onnx_checks
from generator.api import GenConfig, generate
from generator.values import NoValidValues

STRICT = {"check_type": True, "strict_mode": True, "data_prop": True}


def in_process(model: onnx.ModelProto) -> None:
    with contextlib.suppress(onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, **STRICT), full_check=True)


def in_helper(model: onnx.ModelProto) -> None:
    with contextlib.suppress(onnx.checker.ValidationError, onnx.shape_inference.InferenceError):
        onnx_checks.check_model(onnx_checks.infer_shapes(model, **STRICT), full_check=True)


def models(count: int, nodes: int) -> list[onnx.ModelProto]:
    made: list[onnx.ModelProto] = []
    seed = 0
    while len(made) < count:
        with contextlib.suppress(NoValidValues, RuntimeError):
            made.append(generate(seed, GenConfig(nodes=nodes)).model)
        seed += 1
    return made


def per_model_ms(ask: Callable[[onnx.ModelProto], None], batch: list[onnx.ModelProto]) -> float:
    began = time.perf_counter()
    for m in batch:
        ask(m)
    return (time.perf_counter() - began) * 1000 / len(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="fresh model sets, each timed all three ways")
    args = parser.parse_args()
    in_helper(models(1, 2)[0])  # the helper's start is paid once per process, not per call
    rows: dict[str, list[float]] = {"in_process": [], "helper": [], "helper_cached": []}
    for r in range(args.rounds):
        batch = [m for m in models(args.models * (r + 1), args.nodes)[args.models * r :]]
        rows["in_process"].append(per_model_ms(in_process, batch))
        rows["helper"].append(per_model_ms(in_helper, batch))
        rows["helper_cached"].append(per_model_ms(in_helper, batch))
    ms = {k: round(statistics.median(v), 4) for k, v in rows.items()}
    print(
        json.dumps(
            {
                "models": args.models,
                "nodes": args.nodes,
                "rounds": args.rounds,
                "ms_per_model": ms,
                "helper_over_in_process": round(ms["helper"] / ms["in_process"], 3),
                "crashes": onnx_checks.crashes(),
            }
        )
    )


if __name__ == "__main__":
    main()
