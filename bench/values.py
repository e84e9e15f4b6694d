"""Value search: gradient search against the sampling baseline (NNSmith §5.4, Figure 11).

Builds groups of generated models (10, 20 and 30 nodes by default), keeping only models
with at least one op of the unsafe-op table, and runs both methods on the same initial
values of each model. A model counts as a success when the values found pass the margin
check: every intermediate tensor finite and every unsafe op's operand outside its margin.

Prints one JSON object; per group and method: success rate, median and p90 search time,
and search time as a share of the whole generation (growth + emission + search).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from typing import Any

from generator.api import Case, GenConfig, generate, op_specs, with_safe_values
from generator.values import UNSAFE, NoValidValues, margin_hits

METHODS = ("gradient", "sampling")


def unsafe_cases(nodes: int, count: int, first_seed: int, cfg: GenConfig) -> tuple[list[Case], list[float]]:
    """`count` models with an unsafe op, with their generation times (ms, search excluded)."""
    cases: list[Case] = []
    gen_ms: list[float] = []
    seed = first_seed
    while len(cases) < count:
        t0 = time.perf_counter()
        try:
            case = generate(seed, cfg.model_copy(update={"nodes": nodes, "values": "none"}))
        except RuntimeError:
            seed += 1
            continue
        elapsed = 1000 * (time.perf_counter() - t0)
        seed += 1
        if any(n.op_type in UNSAFE for n in case.model.graph.node):
            cases.append(case)
            gen_ms.append(elapsed)
    return cases, gen_ms


def search(case: Case, cfg: GenConfig) -> tuple[bool, float, str]:
    """(valid values found, wall ms, how it ended) for one model and one method."""
    t0 = time.perf_counter()
    try:
        found = with_safe_values(case, cfg)
    except NoValidValues:
        return False, 1000 * (time.perf_counter() - t0), "dropped"
    elapsed = 1000 * (time.perf_counter() - t0)
    assert found.values is not None
    return not margin_hits(found.model, found.inputs), elapsed, found.values.method or "?"


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def group(nodes: int, count: int, first_seed: int, base: GenConfig) -> dict[str, Any]:
    cases, gen_ms = unsafe_cases(nodes, count, first_seed, base)
    out: dict[str, Any] = {"models": len(cases), "generation_ms_median": round(statistics.median(gen_ms), 3)}
    either = [False] * len(cases)
    for method in METHODS:
        cfg = base.model_copy(update={"nodes": nodes, "values": method})
        ok, times, ends = [], [], Counter[str]()
        for i, case in enumerate(cases):
            good, ms, how = search(case, cfg)
            either[i] = either[i] or good
            ok.append(good)
            times.append(ms)
            ends[how] += 1
        out[method] = {
            "success_rate": round(sum(ok) / len(ok), 4),
            "search_ms_median": round(statistics.median(times), 3),
            "search_ms_p90": round(percentile(times, 0.9), 3),
            "search_share_of_generation": round(sum(times) / (sum(times) + sum(gen_ms)), 4),
            "ended_by": dict(sorted(ends.items())),
        }
    # Models neither method solves are mostly infeasible (Acosh after a bounded op, ...).
    out["solved_by_either"] = round(sum(either) / len(either), 4)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=500, help="models per group")
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 20, 30], help="node counts, one group each")
    parser.add_argument("--seed", type=int, default=0, help="first seed of every group")
    parser.add_argument("--budget-ms", type=float, default=GenConfig().value_budget_ms, help="per-model time budget")
    parser.add_argument("--ops", default=None, help="comma-separated op types to draw from (default: all)")
    args = parser.parse_args()
    if args.models < 1 or any(n < 1 or n > 200 for n in args.nodes) or args.budget_ms <= 0:
        print("error: --models and --budget-ms must be positive, --nodes within 1..200", file=sys.stderr)
        return 2
    ops = [o for o in args.ops.split(",") if o] if args.ops else None
    try:
        base = GenConfig(value_budget_ms=args.budget_ms, ops=ops)
        op_specs(base.ops, base.opset)
    except ValueError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    report = {
        "targets": {"success_rate": {"10": 0.99, "20": 0.98, "30": 0.95}, "gradient_ms_median_10": 5.0},
        "budget_ms": args.budget_ms,
        "value_steps": base.value_steps,
        "groups": {str(n): group(n, args.models, args.seed, base) for n in args.nodes},
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
