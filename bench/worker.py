"""The worker's cost, and each backend's compile and run times, on small models.

Prints JSON with two parts:

- `protocol`: what isolation costs per request on onnxruntime. `overhead_ms` is a
  request's wall time seen by the bot minus the import+compile+run time measured
  inside the worker (framing, pipes, scheduling); `in_process_ms` and `worker_ms`
  time the same compile+run called directly and through a worker; `echo_ms` sends
  the model's inputs and gets them back without touching the system. The target is
  at most 2 ms of overhead per request.
- `backends`: for each backend spec that can start here, the worker's start-up
  (import of the system and the handshake), and the median import, compile and run
  seconds per model; a backend that cannot start says why.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from typing import Any

from backends.adapters.ort import OrtAdapter
from backends.client import BackendUnavailable, WorkerClient
from backends.spec import parse_backend
from generator.api import GenConfig, GeneratedCase, generate
from generator.dtypes import DType
from generator.values import NoValidValues

TARGET_MS = 2.0
OPS = ["Add", "Mul", "Sub", "Relu", "Sigmoid", "Tanh", "MatMul", "Conv", "Transpose", "Reshape", "Concat"]
"""Float32 ops every backend implements, so every backend times the same models."""
BACKENDS = [
    "onnxruntime:disable",
    "onnxruntime:all",
    "tvm:O0",
    "tvm:default",
    "openvino:performance",
    "openvino:accuracy",
    "torch.compile:aot_eager",
    "torch.compile:default",
    "tensorrt",
]


def small_models(count: int, nodes: int) -> list[GeneratedCase]:
    cfg = GenConfig(nodes=nodes, ops=OPS, dtypes=[DType.float32], feedback=False)
    cases: list[GeneratedCase] = []
    seed = 0
    while len(cases) < count:
        with contextlib.suppress(NoValidValues):
            cases.append(generate(seed, cfg))
        seed += 1
    return cases


def _ms(values: list[float]) -> float:
    return round(1000 * statistics.median(values), 3)


def protocol(cases: list[GeneratedCase], repeat: int) -> dict[str, Any]:
    adapter = OrtAdapter({})
    direct, worker, overhead, echo = [], [], [], []
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=60) as client:
        for _ in range(repeat):
            for case in cases:
                model = case.model.SerializeToString()
                t = time.perf_counter()
                adapter.run(adapter.compile(model, "all"), case.inputs)
                direct.append(time.perf_counter() - t)
                result = client.run(model, case.inputs)
                inside = (result.import_s or 0.0) + (result.compile_s or 0.0) + (result.run_s or 0.0)
                worker.append(result.wall_s)
                overhead.append(result.wall_s - inside)
                echo.append(client.echo(case.inputs).wall_s)
    return {
        "backend": "onnxruntime:all",
        "requests": len(worker),
        "in_process_ms": _ms(direct),
        "worker_ms": _ms(worker),
        "overhead_ms": _ms(overhead),
        "overhead_p90_ms": round(1000 * statistics.quantiles(overhead, n=10)[-1], 3),
        "echo_ms": _ms(echo),
        "target_ms": TARGET_MS,
        "meets_target": statistics.median(overhead) * 1000 <= TARGET_MS,
    }


def backend_times(spec_text: str, cases: list[GeneratedCase]) -> dict[str, Any]:
    t = time.perf_counter()
    try:
        client = WorkerClient(parse_backend(spec_text), timeout_s=300)
        info = client.start()
    except BackendUnavailable as e:
        return {"backend": spec_text, "unavailable": str(e)}
    startup = time.perf_counter() - t
    imports, compiles, runs, statuses = [], [], [], []
    with client:
        for case in cases:
            r = client.run(case.model.SerializeToString(), case.inputs)
            statuses.append(r.status.value)
            if r.status.value == "ok":
                imports.append(r.import_s or 0.0)
                compiles.append(r.compile_s or 0.0)
                runs.append(r.run_s or 0.0)
    ok = bool(runs)
    return {
        "backend": spec_text,
        "version": info.version,
        "startup_s": round(startup, 3),
        "models": len(cases),
        "statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "import_ms": _ms(imports) if ok else None,
        "compile_ms": _ms(compiles) if ok else None,
        "run_ms": _ms(runs) if ok else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=5, help="generated models per backend")
    parser.add_argument("--nodes", type=int, default=5, help="operators per model")
    parser.add_argument("--repeat", type=int, default=20, help="passes over the models for the protocol part")
    parser.add_argument("--backend", action="append", help="backend specs to time [all built-in ones]")
    args = parser.parse_args()
    cases = small_models(args.models, args.nodes)
    report = {
        "nodes": args.nodes,
        "protocol": protocol(cases, args.repeat),
        "backends": [backend_times(b, cases) for b in args.backend or BACKENDS],
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
