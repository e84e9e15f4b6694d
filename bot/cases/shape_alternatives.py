"""Other values worth trying for a shape-like operand whose op's output shape is not declared.

When a Reshape's output is only an intermediate tensor, its target cannot be read off it;
but the target is usually a shape the model has elsewhere (the shape it was reshaped from,
one a later op's declared output shows), and for axes a small set of choices covers every
valid one. The caller keeps the first candidate that ONNX's strict shape inference finds
consistent with every shape the model declares (bot.cases.shape_sites.consistent).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import combinations, islice
from math import prod

from bot.cases.shape_sites import REDUCE_OPS, Site
from bot.cases.shape_values import ROLE_VALUES, Values

MAX_CANDIDATES = 12
"""Candidates tried per operand: each costs one strict shape inference."""


def _known(site: Site, rank: int) -> list[list[int]]:
    return [shape for shape in site.shapes.values() if len(shape) == rank]


def _reshapes(s: Site) -> Iterable[list[int]]:
    data = s.data
    if data is None or s.out is not None:
        return []
    return [shape for shape in _known(s, s.length) if prod(shape) == prod(data)]


def _expands(s: Site) -> Iterable[list[int]]:
    return [] if s.out is not None else _known(s, s.length)


def _repeats(s: Site) -> Iterable[list[int]]:
    data = s.data
    if data is None or s.out is not None or not all(data):
        return []
    fits = [shape for shape in _known(s, len(data)) if all(o % d == 0 for o, d in zip(shape, data, strict=True))]
    return [[o // d for o, d in zip(shape, data, strict=True)] for shape in fits]


def _axes(s: Site) -> Iterable[list[int]]:
    """Every choice of axes, fewest first: Unsqueeze's among the output's positions,
    Squeeze's among the data's ones, a reduction's among the data's axes."""
    data, n, op = s.data, s.length, s.node.op_type
    if data is None or s.out is not None:
        return []
    if op == "Unsqueeze":
        return (list(c) for c in combinations(range(len(data) + n), n))
    if op == "Squeeze":
        return (list(c) for c in combinations([i for i, d in enumerate(data) if d == 1], n))
    if op in REDUCE_OPS:
        return (list(c) for c in combinations(range(len(data)), n))
    return []


def _topk(s: Site) -> Iterable[list[int]]:
    data = s.data
    if data is None or s.out is not None or s.node.op_type != "TopK":
        return []
    axis = int(s.attr("axis", -1)) % len(data) if data else 0
    return [[k] for k in range(1, min(data[axis], MAX_CANDIDATES) + 1)] if data else []


def _ends(s: Site) -> Iterable[list[int]]:
    """One axis sliced to an undeclared size: the sizes the model's other shapes show."""
    data, axes = s.data, s.operand(3)
    if data is None or s.out is not None or s.length != 1:
        return []
    axis = int(axes.reshape(-1)[0]) if axes is not None else 0
    start = s.operand(1)
    first = int(start.reshape(-1)[0]) if start is not None else 0
    first = first + data[axis] if first < 0 else first
    sizes = sorted({d for shape in s.shapes.values() for d in shape if 0 < d <= data[axis] - first})
    return [[first + d] for d in sizes]


ALTERNATIVES: dict[str, Callable[[Site], Iterable[list[int]]]] = {
    "ends": _ends,
    "shape": lambda s: {"Reshape": _reshapes, "Expand": _expands}.get(s.node.op_type, lambda _: [])(s),
    "repeats": _repeats,
    "axes": _axes,
    "k": _topk,
}


def candidates(site: Site, first: Callable[[Site], Values] | None = None) -> list[Values]:
    """The role's own value first, then the alternatives, each once, at most MAX_CANDIDATES."""
    pick = first or ROLE_VALUES.get(site.role)
    found: list[Values] = [pick(site)] if pick is not None else []
    more = ALTERNATIVES.get(site.role)
    for value in islice(more(site) if more is not None else (), 4 * MAX_CANDIDATES):
        if len(found) >= MAX_CANDIDATES:
            break
        if not any(_same(value, other) for other in found):
            found.append(value)
    return [v for v in found if v is not None]


def _same(a: Values, b: Values) -> bool:
    if a is None or b is None:
        return a is b
    return [float(x) for x in list(a)] == [float(x) for x in list(b)]
