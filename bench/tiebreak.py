"""How wrong results are confirmed: which path decides, on generated cases.

A wrong result against the torch reference stands only with an independent second
reading (oracles.case.CaseEvidence.confirm): onnx.reference agrees with torch, or, where
it disagrees or cannot run, a float64 re-run of the case sides with torch. The system
under test never breaks the tie.

For `--models` generated cases (10 nodes by default) this asks every case the question a
wrong result would face, whatever the backend answered, and counts the paths: how often
onnx.reference settles it, how often the float64 re-run has to, and which side that
re-run takes. It also runs the case on onnxruntime (`--backend`) and counts the real
verdicts, with the paths of the real wrong results among them. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter

from backends.client import WorkerClient
from backends.spec import parse_backend
from generator.api import GenConfig, generate
from generator.values import NoValidValues
from oracles.case import CaseEvidence
from oracles.verdict import Judgement, Verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=300)
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="onnxruntime:all")
    args = parser.parse_args()
    if args.models < 1 or not 1 <= args.nodes <= 200:
        print("error: --models must be positive and --nodes within 1..200", file=sys.stderr)
        return 2
    paths: Counter[str] = Counter()
    sources: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    real: Counter[str] = Counter()
    seconds: list[float] = []
    with WorkerClient(parse_backend(args.backend), timeout_s=30) as client:
        for seed in range(args.seed, args.seed + args.models):
            try:
                case = generate(seed, GenConfig(nodes=args.nodes))
            except (NoValidValues, RuntimeError):
                continue
            ev = CaseEvidence.compute(case.model, case.inputs)
            sources[ev.source.value] += 1
            result = client.run(case.model.SerializeToString(), case.inputs)
            j = ev.judge(result)
            verdicts[j.verdict.value] += 1
            if ev.reference is None or ev.source.value != "torch":
                continue
            t0 = time.perf_counter()
            asked = ev.confirm(Judgement(verdict=Verdict.wrong_result), result.outputs or ev.reference)
            seconds.append(time.perf_counter() - t0)
            paths[asked.path] += 1
            if j.verdict is Verdict.wrong_result:
                real[ev.confirm(j, result.outputs).path] += 1
    report = {
        "models": sum(sources.values()),
        "nodes": args.nodes,
        "backend": args.backend,
        "reference_sources": dict(sources),
        "confirmation_paths_every_case": dict(paths.most_common()),
        "verdicts": dict(verdicts),
        "confirmation_paths_real_wrong_results": dict(real.most_common()),
        "confirm_ms_median": round(1000 * statistics.median(seconds), 2) if seconds else None,
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
