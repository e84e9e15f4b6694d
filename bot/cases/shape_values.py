"""Valid values for the shape-like operands of a model handed over without its inputs
(bot.cases.shape_sites): read off the static shapes around the op where the model declares
them (a Tile whose output is declared [1392] from [12] repeats 116 times), else the value
that changes nothing (repeats of 1, a Reshape to the data's own shape, a full Slice).
None where no valid value can be told: the caller then asks for the inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import numpy as np

from bot.cases.shape_sites import REDUCE_OPS, Site

Values = list[int] | list[float] | np.ndarray | None


def _axis(site: Site, rank: int, default: int = 0) -> int:
    axis = int(site.attr("axis", default))
    return axis + rank if axis < 0 else axis


def _repeats(s: Site) -> Values:
    data, out = s.data, s.out
    if data is None or out is None or not len(data) == len(out) == s.length:
        return [1] * s.length
    if all(d == 0 or o % d == 0 for d, o in zip(data, out, strict=True)):
        return [o // d if d else 1 for d, o in zip(data, out, strict=True)]
    return [1] * s.length


def _reshape(s: Site) -> Values:
    n, out, data = s.length, s.out, s.data
    if out is not None and len(out) == n:
        return out
    if data is None:
        return None
    if n <= len(data):
        return [*data[: n - 1], prod(data[n - 1 :])] if n else ([] if prod(data) == 1 else None)
    return [*data, *[1] * (n - len(data))]


def _expand(s: Site) -> Values:
    n, out = s.length, s.out
    if out is not None:
        return out[len(out) - n :] if n <= len(out) else None
    return [1] * n


def _sizes(s: Site) -> Values:
    """Resize's sizes, CenterCropPad's shape, ConstantOfShape's: the declared output's dims
    (over the op's axes), else the data's (a resize or crop that changes nothing)."""
    n, out, data = s.length, s.out, s.data
    if s.node.op_type == "ConstantOfShape":
        return out if out is not None and len(out) == n else [1] * n
    if n == 0:
        return []
    for shape in (out, data):
        if shape is None:
            continue
        axes = [a % len(shape) for a in s.attr("axes", list(range(len(shape))))] if shape else []
        if len(axes) == n:
            return [shape[a] for a in axes]
    return None


def _scales(s: Site) -> Values:
    if s.length == 0:
        return []
    data, out = s.data, s.out
    if data is not None and out is not None and len(data) == len(out) == s.length and all(data):
        return [o / d for d, o in zip(data, out, strict=True)]
    return [1.0] * s.length


def _roi(s: Site) -> Values:
    half = s.length // 2
    return [0.0] * half + [1.0] * (s.length - half)


def _slice_axes(s: Site) -> Values:
    rank = len(s.data) if s.data is not None else s.length
    return list(range(s.length)) if s.length <= rank else None


def _slice_starts(s: Site) -> Values:
    """The start of each axis in its step's direction, or the one that, with constant ends
    and the declared output, gives that output's dims."""
    data, out = s.data, s.out
    axes, ends, steps = s.operand(3), s.operand(2), s.operand(4)
    axes_list = [int(a) for a in axes.reshape(-1)] if axes is not None else list(range(s.length))
    starts: list[int] = []
    for i, axis in enumerate(axes_list):
        step = int(steps.reshape(-1)[i]) if steps is not None else 1
        if ends is None or data is None or out is None or not step:
            starts.append(0 if step >= 0 else -1)
            continue
        dim = data[axis]
        end = int(ends.reshape(-1)[i])
        end = min(max(end + dim if end < 0 else end, -1), dim)
        start = end - step * out[axis]
        starts.append(min(max(start, 0), dim - 1) if step < 0 else max(start, 0))
    return starts


def _slice_ends(s: Site) -> Values:
    """Ends that give the declared output's dims from the starts and steps (constant or
    already chosen); where the output is not declared, the end of the axis in the step's
    direction."""
    data, out = s.data, s.out
    axes, starts, steps = s.operand(3), s.operand(1), s.operand(4)
    axes_list = [int(a) for a in axes.reshape(-1)] if axes is not None else list(range(s.length))
    info = np.iinfo(s.dtype) if s.dtype.kind in "iu" else np.iinfo(np.int32)
    ends: list[int] = []
    for i, axis in enumerate(axes_list):
        step = int(steps.reshape(-1)[i]) if steps is not None else 1
        start = int(starts.reshape(-1)[i]) if starts is not None else 0
        if step == 0:
            return None
        if out is None or data is None:
            ends.append(int(info.max) if step > 0 else int(info.min))
            continue
        dim = data[axis]
        first = min(max(start + dim if start < 0 else start, 0), dim if step > 0 else dim - 1)
        end = first + step * (out[axis] - 1) + (1 if step > 0 else -1) if out[axis] else first
        ends.append(end if end >= 0 else int(info.min))
    return ends


def _range_limit(s: Site) -> Values:
    start = s.operand(0)
    delta = s.operand(2)
    first = float(start.reshape(-1)[0]) if start is not None else 0.0
    step = float(delta.reshape(-1)[0]) if delta is not None else 1.0
    count = s.out[0] if s.out is not None and len(s.out) == 1 else 4
    return [first + count * step]


def _topk(s: Site) -> Values:
    out = s.out
    return [out[_axis(s, len(out), -1)]] if out is not None else [1]


def _one_hot_depth(s: Site) -> Values:
    out = s.out
    return [out[_axis(s, len(out), -1)]] if out is not None else [8]


def _pads(s: Site) -> Values:
    data, out = s.data, s.out
    axes = s.operand(3)
    rank = len(data) if data is not None else s.length // 2
    chosen = [int(a) % rank for a in axes.reshape(-1)] if axes is not None and rank else list(range(rank))
    if 2 * len(chosen) != s.length:
        return None
    if data is None or out is None:
        return [0] * s.length
    diffs = [out[a] - data[a] for a in chosen]
    return [d // 2 for d in diffs] + [d - d // 2 for d in diffs]


def _inserted(short: list[int], long: list[int]) -> list[int] | None:
    """The positions of `long` that are ones added to `short` (Unsqueeze's axes, or
    Squeeze's and a reduction's when read the other way)."""
    added: list[int] = []
    j = 0
    for i, d in enumerate(long):
        if j < len(short) and short[j] == d:
            j += 1
        elif d == 1:
            added.append(i)
        else:
            return None
    return added if j == len(short) else None


def _axes(s: Site) -> Values:
    """Unsqueeze's, Squeeze's and the reductions' axes (Slice and Pad have their own)."""
    data, out, n = s.data, s.out, s.length
    op = s.node.op_type
    if op == "Unsqueeze":
        if data is not None and out is not None and (found := _inserted(data, out)) is not None and len(found) == n:
            return found
        return list(range(len(data), len(data) + n)) if data is not None else None
    if data is None:
        return None
    if op == "Squeeze" or (op in REDUCE_OPS and not s.attr("keepdims", 1)):
        found = _inserted(out, data) if out is not None else None
        ones = [i for i, d in enumerate(data) if d == 1]
        return found if found is not None and len(found) == n else (ones[:n] if len(ones) >= n else None)
    if out is not None and len(out) == len(data):
        reduced = [i for i, (d, o) in enumerate(zip(data, out, strict=True)) if o == 1 and d != 1]
        if len(reduced) == n:
            return reduced
    return list(range(n)) if n <= len(data) else None


def _split(s: Site) -> Values:
    data = s.data
    if data is None:
        return None
    axis = _axis(s, len(data))
    outs = [s.shape(name) for name in s.node.output]
    if all(o is not None for o in outs) and len(outs) == s.length:
        return [o[axis] for o in outs if o is not None]
    whole = data[axis]
    return [whole // s.length] * s.length if s.length and whole % s.length == 0 else None


def _first_axis(s: Site) -> Values:
    """CumSum's axis and Trilu's k: 0 is always valid."""
    return [0] * s.length


def _batch_indices(s: Site) -> Values:
    data = s.data
    return s.rng.integers(0, data[0], size=s.dims) if data is not None and data[0] else None


ROLE_VALUES: dict[str, Callable[[Site], Values]] = {
    "repeats": _repeats,
    "shape": lambda s: {"Reshape": _reshape, "Expand": _expand}.get(s.node.op_type, _sizes)(s),
    "sizes": _sizes,
    "scales": _scales,
    "roi": _roi,
    "starts": _slice_starts,
    "pads": _pads,
    "steps": lambda s: [1] * s.length,
    "ends": _slice_ends,
    "axes": lambda s: {"Slice": _slice_axes, "Pad": _slice_axes}.get(s.node.op_type, _axes)(s),
    "start": lambda s: [0] * s.length,
    "delta": lambda s: [1] * s.length,
    "limit": _range_limit,
    "k": lambda s: _topk(s) if s.node.op_type == "TopK" else _first_axis(s),
    "depth": _one_hot_depth,
    "split": _split,
    "axis": _first_axis,
    "batch_indices": _batch_indices,
}
"""role -> its value; the index roles are bot.cases.index_values'. A role missing from both
(Col2Im's image and block shapes) is one fuzzbot cannot draw."""
