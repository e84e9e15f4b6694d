"""NaN/Inf-free values: what keeping them costs, and the search against the sampling baseline.

Builds groups of generated models (10, 20 and 30 nodes by default), keeping only models
with at least one op of the unsafe-op table, and measures two things per group:

- `grown`: the generator as it runs (generator.witness). Each graph keeps safe values for
  every tensor while it grows, repaired by the gradient search (or, for the baseline, by
  sampling) whenever an insertion breaks them, and an insertion no repair fixes is
  refused. Success is checked on the emitted model with the oracles' margin check, apart
  from the generator's own bookkeeping. Budgets count steps, never seconds, so no case
  is dropped for time.
- `from_random`: NNSmith's protocol (§5.4, Figure 11) on the same models: every input and
  weight drawn anew from the generator's distributions, then the search of
  generator.values (gradient, or sampling alone) has to find safe values from there.
- `unchecked`: the same protocol on models grown without values (`values: none`), where
  nothing refuses a composition no values can make safe: what the search alone achieves
  on what a generator without this check builds.

Success: every intermediate tensor finite and every unsafe op's operand outside its margin.
Per group and method: success rate, median and p90 value time, and value time as a share
of the whole generation (growth + emission + values). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from generator.api import GenConfig, GeneratedCase, grow_case, op_specs, with_safe_values
from generator.values import UNSAFE, NoValidValues, apply_values, margin_hits

T = TypeVar("T")

METHODS = ("gradient", "sampling")
FRESH_SALT = 0x46524553
"""Mixed into the seed of the fresh draws, apart from every generator stream."""


@dataclass
class Grown:
    """One case as the generator made it, or None where it was dropped."""

    seed: int
    total_ms: float
    value_ms: float
    case: GeneratedCase | None
    start: GeneratedCase | None
    """The same model with every input and weight drawn anew (for `from_random`)."""
    valid: bool


def grow(seed: int, cfg: GenConfig) -> Grown | None:
    """The case of `seed`, or None when it has no unsafe op (or no op could be inserted)."""
    t0 = time.perf_counter()
    try:
        case, witness = grow_case(seed, cfg)
    except RuntimeError:
        return None
    elapsed = 1000 * (time.perf_counter() - t0)
    if not has_unsafe_op(case):
        return None
    assert case.values is not None
    start = GeneratedCase(seed, *apply_values(case.model, case.inputs, witness.fresh(seed ^ FRESH_SALT)))
    return Grown(seed, elapsed, case.values.time_ms, case, start, not margin_hits(case.model, case.inputs))


def first_cases(count: int, first_seed: int, make: Callable[[int], T | None]) -> list[T]:
    """`make` of consecutive seeds until `count` of them give a case."""
    out: list[T] = []
    seed = first_seed
    while len(out) < count:
        made = make(seed)
        seed += 1
        if made is not None:
            out.append(made)
    return out


def has_unsafe_op(case: GeneratedCase) -> bool:
    return any(n.op_type in UNSAFE for n in case.model.graph.node)


def grown_group(nodes: int, count: int, first_seed: int, cfg: GenConfig) -> list[Grown]:
    return first_cases(count, first_seed, lambda seed: grow(seed, cfg.model_copy(update={"nodes": nodes})))


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def timing(ok: list[bool], times: list[float], generation: list[float]) -> dict[str, float]:
    """Success rate, median and p90 value time, and its share of generation + values."""
    return {
        "success_rate": round(sum(ok) / len(ok), 4),
        "value_ms_median": round(statistics.median(times), 3),
        "value_ms_p90": round(percentile(times, 0.9), 3),
        "value_share_of_generation": round(sum(times) / (sum(times) + sum(generation)), 4),
    }


def grown_stats(cases: list[Grown]) -> dict[str, Any]:
    kept = [g for g in cases if g.case is not None]
    outcomes = [g.case.values for g in kept if g.case is not None and g.case.values is not None]
    return {
        **timing([g.valid for g in cases], [g.value_ms for g in cases], [g.total_ms - g.value_ms for g in cases]),
        "generation_ms_median": round(statistics.median(g.total_ms for g in cases), 3),
        "nodes_mean": round(statistics.mean(len(g.case.model.graph.node) for g in kept if g.case), 2),
        "repaired_insertions_per_model": round(statistics.mean(o.grown_repairs for o in outcomes), 3),
        "refused_insertions_per_model": round(statistics.mean(o.grown_refusals for o in outcomes), 3),
    }


def from_random(cases: list[Grown], cfg: GenConfig) -> dict[str, Any]:
    """Gradient search and sampling from fresh random values, on the same grown models."""
    kept = [g for g in cases if g.start is not None]
    starts = [g.start for g in kept if g.start is not None]
    generation = [g.total_ms - g.value_ms for g in kept]
    out: dict[str, Any] = {"models": len(kept)}
    for method in METHODS:
        search = _searcher(cfg.model_copy(update={"values": method}))
        results = [search(c) for c in starts]
        out[method] = timing([ok for ok, _ in results], [ms for _, ms in results], generation)
    return out


def _searcher(cfg: GenConfig) -> Callable[[GeneratedCase], tuple[bool, float]]:
    def search(case: GeneratedCase) -> tuple[bool, float]:
        t0 = time.perf_counter()
        try:
            found = with_safe_values(case, cfg)
        except NoValidValues:
            return False, 1000 * (time.perf_counter() - t0)
        elapsed = 1000 * (time.perf_counter() - t0)
        return not margin_hits(found.model, found.inputs), elapsed

    return search


def unchecked(nodes: int, count: int, first_seed: int, base: GenConfig) -> dict[str, Any]:
    """The gradient search from the emitted random values, on models grown without values."""
    cfg = base.model_copy(update={"nodes": nodes, "values": "none"})
    cases = first_cases(count, first_seed, lambda seed: _unchecked_case(seed, cfg))
    results = [_searcher(base.model_copy(update={"values": "gradient"}))(c) for c in cases]
    return {"models": count, "success_rate": round(sum(ok for ok, _ in results) / count, 4)}


def _unchecked_case(seed: int, cfg: GenConfig) -> GeneratedCase | None:
    try:
        case, _ = grow_case(seed, cfg)
    except RuntimeError:
        return None
    return case if has_unsafe_op(case) else None


def group(nodes: int, count: int, first_seed: int, base: GenConfig) -> dict[str, Any]:
    grown = {m: grown_group(nodes, count, first_seed, base.model_copy(update={"values": m})) for m in METHODS}
    return {
        "models": count,
        "grown": {m: grown_stats(cases) for m, cases in grown.items()},
        "from_random": from_random(grown["gradient"], base),
        "unchecked": unchecked(nodes, count, first_seed, base),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=500, help="models per group")
    parser.add_argument("--nodes", type=int, nargs="+", default=[10, 20, 30], help="node counts, one group each")
    parser.add_argument("--seed", type=int, default=0, help="first seed of every group")
    parser.add_argument("--ops", default=None, help="comma-separated op types to draw from (default: all)")
    args = parser.parse_args()
    if args.models < 1 or any(n < 1 or n > 200 for n in args.nodes):
        print("error: --models must be positive, --nodes within 1..200", file=sys.stderr)
        return 2
    ops = [o for o in args.ops.split(",") if o] if args.ops else None
    try:
        base = GenConfig(ops=ops)
        op_specs(base.ops, base.opset)
    except ValueError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    report = {
        "targets": {"success_rate": {"10": 0.99, "20": 0.98, "30": 0.95}, "gradient_ms_median_10": 5.0},
        "value_steps": base.value_steps,
        "groups": {str(n): group(n, args.models, args.seed, base) for n in args.nodes},
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
