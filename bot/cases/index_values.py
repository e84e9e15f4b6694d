"""Valid index operands for a model handed over without its inputs: every index inside the
dimension it addresses, and, where the op writes through them (Scatter, ScatterElements,
ScatterND), no two writing one element, which the spec leaves undefined, so that no build's
answer is wrong. None where no such indices exist (more writes than elements)."""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import numpy as np

from bot.cases.shape_sites import Site

Values = np.ndarray | None


def _axis(site: Site, rank: int) -> int:
    axis = int(site.attr("axis", 0))
    return axis + rank if axis < 0 else axis


def _along_axis(s: Site) -> Values:
    """Gather's and GatherElements' indices: each in [0, dim) of the axis they index."""
    data = s.data
    if data is None:
        return None
    dim = data[_axis(s, len(data))]
    return s.rng.integers(0, dim, size=s.dims) if dim else None


def _scatter_elements(s: Site) -> Values:
    """Distinct along the axis in every fiber, so that no element is written twice."""
    data = s.data
    if data is None or not s.dims:
        return None
    axis = _axis(s, len(data))
    count, dim = s.dims[axis], data[axis]
    if count > dim:
        return None
    moved = [*s.dims[:axis], *s.dims[axis + 1 :]]
    fibers = [s.rng.permutation(dim)[:count] for _ in range(prod(moved))]
    stacked = np.stack(fibers).reshape([*moved, count]) if fibers else np.zeros([*moved, count], np.int64)
    return np.moveaxis(stacked, -1, axis)


def _nd(s: Site, distinct: bool) -> Values:
    """GatherND's (and, distinct, ScatterND's) index tuples over the data's leading dims."""
    data = s.data
    if data is None or not s.dims:
        return None
    batch = int(s.attr("batch_dims", 0))
    depth = s.dims[-1]
    dims = data[batch : batch + depth]
    if len(dims) != depth or not all(dims):
        return None
    count = prod(s.dims[:-1])
    if not distinct:
        return np.stack([s.rng.integers(0, d, size=s.dims[:-1]) for d in dims], axis=-1) if depth else None
    if count > prod(dims):
        return None
    flat = s.rng.permutation(prod(dims))[:count]
    return np.stack(np.unravel_index(flat, dims), axis=-1).reshape(s.dims)


INDEX_VALUES: dict[str, Callable[[Site], Values]] = {
    "Gather": _along_axis,
    "GatherElements": _along_axis,
    "GatherND": lambda s: _nd(s, distinct=False),
    "Scatter": _scatter_elements,
    "ScatterElements": _scatter_elements,
    "ScatterND": lambda s: _nd(s, distinct=True),
}
"""op type -> the values of its `indices` operand."""
