"""Run-time evidence for a false-positive rule: another legitimate computation of the
case that moves exactly the elements that mismatched.

A rule may not take a case off the report because an op is present. It must show that
the difference is one the spec allows, on these values: the reference is re-run with the
matched nodes computed another legitimate way, and every mismatching element of the
backend's outputs must be explained by one such re-run. A choice the spec leaves open (a
near-tie broken the other way, NaN handled as ONNX also permits, a near-equal comparison
flipped) explains an element where the backend's value is that re-run's. An operand near
an unsafe op's edge, moved by its margin, explains an element that the move changes
beyond tolerance: there the result is too sensitive to say anything. A bug elsewhere in
the graph, or in another slice of the same op, is not explained and stays reported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import onnx
import torch

from backends.reference import ReferenceError, Substitute, run_reference
from generator.ops import registry
from generator.ops.base import Attrs
from generator.values.predicate import MARGIN
from oracles.compare import bad_mask
from oracles.tolerances import Tolerance, tolerance_for

Masks = dict[str, np.ndarray]

TIE_WIDTH: dict[torch.dtype, float] = dict(MARGIN)
"""Relative width within which two computed values are a tie (or a comparison of them a
toss-up): δ of the margin check, 2^-10 in float32, 2^-5 in float16, 2^-20 in float64."""


@dataclass(frozen=True)
class Alternative:
    """Some nodes computed another legitimate way, all in one re-run. `sensitivity`: the
    re-run shows instability (what it moves is explained), not a choice (what it equals)."""

    why: str
    substitute: dict[int, Substitute]
    sensitivity: bool = False


def explained(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    actual: Mapping[str, np.ndarray],
    bounds: Mapping[str, Tolerance],
    alternatives: Sequence[Alternative],
) -> Masks:
    """Per output, the elements some alternative explains (see the module docstring)."""
    out: Masks = {}
    for alt in alternatives:
        try:
            other = run_reference(model, inputs, substitute=alt.substitute)
        except ReferenceError:
            continue
        for name, want in reference.items():
            got, seen = other.get(name), actual.get(name)
            if got is None or seen is None or not want.shape == got.shape == seen.shape:
                continue
            if not want.dtype == got.dtype == seen.dtype:
                continue
            tol = bounds.get(name) or tolerance_for(want.dtype)
            covered = bad_mask(want, got, tol) if alt.sensitivity else ~bad_mask(got, seen, tol)
            out[name] = out[name] | covered if name in out else covered
    return out


def explains(bad: Masks, covered: Masks) -> bool:
    """Every mismatching element is covered (and something mismatched)."""
    if not bad or not any(m.any() for m in bad.values()):
        return False
    for name, mask in bad.items():
        if not mask.any():
            continue
        other = covered.get(name)
        if other is None or other.shape != mask.shape or bool((mask & ~other).any()):
            return False
    return True


# -- ties --------------------------------------------------------------------------


def _spec(op_type: str) -> Substitute:
    return cast(Substitute, registry()[op_type].reference)


def tie_floor(dtype: torch.dtype) -> float:
    """Absolute tie width: the dtype's epsilon, one rounding of a value of magnitude 1.
    Computed values smaller apart than that are a tie whatever their ratio: onnxruntime's
    Sigmoid gives 0 at -50 and at -70, where torch gives 2e-22 and 4e-31, both right to far
    better than any tolerance, so a TopK over them picks another winner on each."""
    return float(torch.finfo(dtype).eps) if dtype.is_floating_point else 0.0


def near_equal(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where two computed values (as float64) are within TIE_WIDTH of each other at `dtype`:
    what a comparison of them may decide either way."""
    rel = TIE_WIDTH.get(dtype, 0.0)
    return (a - b).abs() <= rel * torch.maximum(a.abs(), b.abs())


def within_tie(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Where two computed values (as float64) are a tie or a near-tie at `dtype`: near-equal,
    or closer than the dtype's floor."""
    return near_equal(a, b, dtype) | ((a - b).abs() <= tie_floor(dtype))


def tied_runs(x: torch.Tensor, axis: int, count: int, largest: bool) -> list[tuple[int, list[int]]]:
    """(slice, positions): each run of the `count` deciding elements of a slice (the best
    two, or the best k + 1) that tie, each within TIE_WIDTH of the next in sorted order,
    the positions along `axis` in index order. A run that reaches the last deciding element
    goes on through every element tied with it: with k = 1 over three equal values, the
    third may be the one a backend's rounding puts an ulp ahead (onnxruntime 1.30's LRN
    gave the last of three equal batch rows an ulp more, and its TopK rightly chose it)."""
    rows = torch.movedim(x, axis, -1).reshape(-1, x.shape[axis]).double()
    count = min(count, rows.shape[1])
    if count < 2:
        return []
    order = torch.argsort(-rows if largest else rows, dim=1, stable=True)
    best = torch.gather(rows, 1, order)
    tied = within_tie(best[:, :-1], best[:, 1:], x.dtype)
    runs: list[tuple[int, list[int]]] = []
    for r in range(rows.shape[0]):
        run: list[int] = []
        for c in range(rows.shape[1] - 1):
            if c >= count - 1 and not run:
                break  # past the deciding elements, only a run that reaches them goes on
            if bool(tied[r, c]):
                run = run or [int(order[r, c])]
                run.append(int(order[r, c + 1]))
            elif run:
                runs.append((r, sorted(run)))
                run = []
        if run:
            runs.append((r, sorted(run)))
    return runs


def deciding(op_type: str, attrs: Attrs, x: torch.Tensor, k: torch.Tensor | None) -> tuple[int, int, bool]:
    """(axis, deciding elements, largest first) of an ArgMax, ArgMin, Hardmax or TopK node."""
    rank = max(x.dim(), 1)
    if op_type == "TopK":
        count = int(k.reshape(-1)[0]) + 1 if k is not None and k.numel() else 0
        return int(attrs.get("axis", -1)) % rank, count, bool(attrs.get("largest", 1))
    default = -1 if op_type == "Hardmax" else 0
    return int(attrs.get("axis", default)) % rank, 2, op_type != "ArgMin"


TIE_PICKS = 4
"""How many of a slice's tied candidates are tried as the winner from each end (the first
ones, then the last ones)."""


def tied_with_best(x: torch.Tensor, axis: int, largest: bool) -> list[tuple[int, list[int]]]:
    """(slice, candidates): positions along `axis` within TIE_WIDTH of the slice's best, in
    index order, for the slices where more than one is."""
    rows = torch.movedim(x, axis, -1).reshape(-1, x.shape[axis]).double()
    best = rows.amax(dim=1, keepdim=True) if largest else rows.amin(dim=1, keepdim=True)
    close = within_tie(rows, best, x.dtype)
    return [(r, close[r].nonzero().flatten().tolist()) for r in range(rows.shape[0]) if int(close[r].sum()) > 1]


TieDecision = Callable[[torch.Tensor, int, list[int], bool], None]
"""Decides one tie: given a slice's rows (row `r` tied at `candidates`, the best the
largest when the bool says so), sets the candidates' values so that one decision wins."""


def _with_ties_decided(op_type: str, decide: TieDecision) -> Substitute:
    """The op computed on its first input with every tied slice decided by `decide`: the
    deciding elements' runs for TopK (`tied_runs`), those tied with the best elsewhere."""
    reference = _spec(op_type)

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        x = args[0]
        assert x is not None
        if x.dim() == 0:
            return reference(attrs, args)
        axis, count, largest = deciding(op_type, attrs, x, args[1] if len(args) > 1 else None)
        moved = torch.movedim(x, axis, -1).clone()
        rows = moved.reshape(-1, x.shape[axis])
        groups = tied_runs(x, axis, count, largest) if op_type == "TopK" else tied_with_best(x, axis, largest)
        for r, candidates in groups:
            decide(rows, r, candidates, largest)
        changed = torch.movedim(rows.reshape(moved.shape), -1, axis)
        return reference(attrs, [changed, *args[1:]])

    return run


def break_ties(op_type: str, pick: int, behind: bool = False) -> Substitute:
    """The op computed on its first input with each slice's tie decided one way, the winner
    an ulp ahead of the best (so an exact tie is broken too): for ArgMax, ArgMin and Hardmax
    the `pick`-th of the candidates tied with the best (counted from the last when negative:
    with select_last_index, a computed tie between rows that Concat or Tile copied is decided
    among the last copies); for TopK, the `pick`-th of each run of tied values among the k + 1
    deciding ones, within the k chosen as at their boundary: the indices come out sorted
    by value, so a tie inside them orders them too. onnxruntime's vectorized Atan gave one of
    three equal inputs an ulp less, and its TopK rightly put that one first; the old
    pairwise break never moved a third member ahead. Each is a winner a backend's rounding
    may pick. `behind`: the `pick`-th an ulp behind the last of its run instead: three
    float64 means of 1/7, summed in another order by onnxruntime, came out of its TopK as
    1, 2, 0, which no winner gives."""

    def decide(rows: torch.Tensor, r: int, candidates: list[int], largest: bool) -> None:
        ahead = largest != behind
        values = rows[r, candidates]
        edge = values.max() if ahead else values.min()
        at = min(pick, len(candidates) - 1) if pick >= 0 else max(pick, -len(candidates))
        rows[r, candidates[at]] = torch.nextafter(
            edge, torch.tensor(float("inf") if ahead else -float("inf"), dtype=rows.dtype)
        )

    return _with_ties_decided(op_type, decide)


def ties_as_chosen(op_type: str, winners: list[list[int]]) -> Substitute:
    """The op computed on its first input with each slice's tie decided as the build
    decided it: of the candidates the reference's values tie (`tied_runs`, `tied_with_best`),
    those the build chose (`winners`, per slice, in its order) are put an ulp apart ahead of
    the rest. The build's answer only picks among the candidates the reference itself
    ties; an index outside them changes nothing and stays a mismatch. A tie of many
    members whose winner the build's rounding picks per slice is past any fixed pick:
    onnxruntime computes the imaginary part of a real signal's STFT at its DC bin, zero in
    every frame, as noise of 1e-15, and its TopK over 24 frames took frame 19 in one
    slice and 2 in another; its InstanceNormalization over one element gives the bias with
    noise of 5e-6, and a Hardmax over 16 such rows took 0, 5, 4, 7 or 14."""

    def decide(rows: torch.Tensor, r: int, candidates: list[int], largest: bool) -> None:
        chosen = [c for c in (winners[r] if r < len(winners) else []) if c in candidates]
        values = rows[r, candidates]
        value = values.max() if largest else values.min()
        toward = torch.tensor(float("inf") if largest else -float("inf"), dtype=rows.dtype)
        for c in reversed(chosen):
            value = torch.nextafter(value, toward)
            rows[r, c] = value

    return _with_ties_decided(op_type, decide)


def collapse_ties(op_type: str) -> Substitute:
    """The op computed on its first input with every run of values that tie (in sorted
    order, each within the tie width of the next) made equal, so that ONNX's own tie-break
    (the first index) decides among them: what a backend does whose rounding computed them
    equal, as onnxruntime's Sigmoid gives 0 for each of 2e-22, 9e-27 and 4e-31."""
    reference = _spec(op_type)

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        x = args[0]
        assert x is not None
        if x.dim() == 0 or not x.is_floating_point():
            return reference(attrs, args)
        axis, _, largest = deciding(op_type, attrs, x, args[1] if len(args) > 1 else None)
        moved = torch.movedim(x, axis, -1).clone()
        rows = moved.reshape(-1, x.shape[axis])
        order = torch.argsort(-rows if largest else rows, dim=1, stable=True)
        for r in range(rows.shape[0]):
            sorted_row = rows[r, order[r]].double()
            joined = within_tie(sorted_row[:-1], sorted_row[1:], x.dtype)
            for c in range(1, rows.shape[1]):
                if joined[c - 1]:
                    rows[r, order[r, c]] = rows[r, order[r, c - 1]]
        changed = torch.movedim(rows.reshape(moved.shape), -1, axis)
        return reference(attrs, [changed, *args[1:]])

    return run


# -- NaN ---------------------------------------------------------------------------

NAN_OPS = {"Max": True, "ReduceMax": True, "Min": False, "ReduceMin": False}
"""Ops whose NaN handling ONNX leaves open -> True when they pick the largest."""


def nan_loses(op_type: str) -> Substitute:
    """NaN never wins: a max (min) skips it, a NaN Clip bound is no bound."""
    reference = _spec(op_type)

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        out: list[torch.Tensor | None] = []
        for slot, a in enumerate(args):
            if a is None or not a.is_floating_point() or (op_type == "Clip" and slot == 0):
                out.append(a)
                continue
            largest = NAN_OPS.get(op_type, slot == 1)
            out.append(torch.nan_to_num(a, nan=-float("inf") if largest else float("inf")))
        return reference(attrs, out)

    return run


def _select_max(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(a > b, a, b)


def _select_min(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(a < b, a, b)


def nan_select(op_type: str, reverse: bool) -> Substitute:
    """`a > b ? a : b` kernels: which operand a NaN is decides whether it wins."""

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        present = [a for a in args if a is not None]
        if op_type == "Clip":
            x = present[0]
            lo = args[1] if len(args) > 1 else None
            hi = args[2] if len(args) > 2 else None
            if lo is not None:
                x = _select_max(x, lo.to(x.dtype)) if not reverse else _select_max(lo.to(x.dtype), x)
            if hi is not None:
                x = _select_min(x, hi.to(x.dtype)) if not reverse else _select_min(hi.to(x.dtype), x)
            return [x]
        pick = _select_max if NAN_OPS[op_type] else _select_min
        order = present[::-1] if reverse else present
        acc = order[0]
        for x in order[1:]:
            acc = pick(acc, x)
        return [acc]

    return run


def nan_alternatives(nodes: Sequence[tuple[int, str]]) -> list[Alternative]:
    """The NaN semantics backends really have, each applied to every matched node."""
    loses = Alternative("NaN skipped", {i: nan_loses(op) for i, op in nodes})
    selects = [(i, op) for i, op in nodes if op in ("Max", "Min", "Clip")]
    alts = [loses]
    for reverse in (False, True):
        if selects:
            alts.append(Alternative("NaN by operand order", {i: nan_select(op, reverse) for i, op in selects}))
    return alts


# -- comparisons -------------------------------------------------------------------


def flip_near(op_type: str) -> Substitute:
    """The comparison with every near-equal pair of operands decided the other way, a pair
    closer than the dtype's floor included: a special value's -0.0 against a computed output
    that cancels to -1e-18 in torch and 1e-9 in onnxruntime is no relative near-tie, and was
    a false report of Less on onnxruntime 1.31.1."""
    reference = _spec(op_type)

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        a, b = args[0], args[1]
        assert a is not None and b is not None
        result = reference(attrs, args)[0]
        if not a.is_floating_point():
            return [result]
        x, y = torch.broadcast_tensors(a.double(), b.double())
        return [torch.where(within_tie(x, y, a.dtype), ~result, result)]

    return run


# -- margins -----------------------------------------------------------------------


def nudge(op_type: str, slot: int, where: torch.Tensor | None, margin: float, sign: float) -> Substitute:
    """The op with one operand moved by its margin (relative above 1) at the elements that
    lie within it: what a backend's legitimate rounding upstream could have done."""
    reference = _spec(op_type)

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        x = args[slot]
        assert x is not None
        step = (margin * x.double().abs().clamp_min(1.0)).to(x.dtype)
        mask = where if where is not None and where.shape == x.shape else torch.ones_like(x, dtype=torch.bool)
        moved = torch.where(mask, x + sign * step, x)
        return reference(attrs, [*args[:slot], moved, *args[slot + 1 :]])

    return run


def finite(op_type: str) -> Substitute:
    """The op with its non-finite results replaced by 0: what depends on a NaN or Inf the
    reference itself computed, where any answer is as good as another."""
    reference = _spec(op_type)

    def run(attrs: Attrs, args: list[torch.Tensor | None]) -> list[torch.Tensor]:
        return [
            torch.nan_to_num(t, nan=0.0, posinf=0.0, neginf=0.0) if t.is_floating_point() else t
            for t in reference(attrs, args)
        ]

    return run
