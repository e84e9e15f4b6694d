"""Constraints the ONNX schema text states and onnx's checker does not enforce, kept as data.

A reduced model that onnx.checker accepts can still say nothing the spec defines: a DFT whose
input's last dim is 3, an AffineGrid whose theta is not N x 2 x 3 for a 4-element size, a
Conv whose channels do not divide by its group. A backend that fails on such a model has no
bug to report, and two builds that differ on it differ on a form the spec leaves open. The
checker cannot be relied on to keep them out, so generation and reduction both need these
constraints from somewhere else: here, one entry per constraint, beside the schema sentence
that states it.

Where the list came from: an audit of every ai.onnx schema text in onnx 1.23.2 (the version
this project pins). It found 195 constraints stated in the text; strict shape inference plus
the full checker enforce 86 of them and not the other 109, of which 83 are static (checkable
from attributes, element types and shapes alone; the rest depend on tensor values). 64 of
the 83 are here (docs/spec_constraints.md lists the other 19 and why they are not). Each
sentence is quoted verbatim from the schema, and each entry applies from the first opset
whose schema text says it to the last before a schema that no longer does.

A predicate only reports what it can tell: a dim that is symbolic or unknown, a rank that
inference could not give, an input that is not a constant where a value is needed, each
means "cannot tell" and never a violation. A false alarm would refuse a good model, and a
reducer that refuses a good candidate only reduces less, but generation that refuses good
models draws around a hole nobody sees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from generator import onnx_checks

Dims = tuple[int | None, ...]
"""A static shape as far as it is known: None for a dim that is symbolic or unknown."""


@dataclass(frozen=True)
class Operand:
    """What one node input is known to be: a missing rank (shape None) or element type (0)
    means inference could not tell; `value` only for a constant (initializer or Constant)."""

    shape: Dims | None
    elem_type: int = 0
    value: np.ndarray | None = None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def dim(self, axis: int) -> int | None:
        """The dim at `axis` (negative from the end) when known and in range, else None."""
        if self.shape is None or not -len(self.shape) <= axis < len(self.shape):
            return None
        return self.shape[axis]


UNKNOWN = Operand(None)


@dataclass(frozen=True)
class NodeFacts:
    """One node as a predicate reads it: attributes as given (absent ones are the schema's
    default, which each predicate names), inputs by position (UNKNOWN where absent), and the
    number of outputs."""

    op_type: str
    name: str
    attrs: Mapping[str, Any]
    inputs: tuple[Operand, ...]
    present: tuple[bool, ...]
    outputs: int

    def input(self, i: int) -> Operand:
        return self.inputs[i] if i < len(self.inputs) else UNKNOWN

    def has(self, i: int) -> bool:
        """Whether the optional input at `i` is given (an empty name is absent)."""
        return i < len(self.present) and self.present[i]


Predicate = Callable[[NodeFacts], bool]
"""True only when the node certainly violates its constraint."""


@dataclass(frozen=True)
class SpecConstraint:
    """One constraint the schema text states and onnx 1.23.2 does not enforce.

    `first` is the first opset whose schema of `op_type` says `sentence`; `last` the last
    opset before a schema that no longer says it (None: the newest schema still does)."""

    op_type: str
    first: int
    last: int | None
    sentence: str
    statement: str
    violated: Predicate

    @property
    def key(self) -> str:
        """Stable across renames (the reducer renames nodes): the op and the statement."""
        return f"{self.op_type}: {self.statement}"

    def applies(self, opset: int) -> bool:
        return self.first <= opset and (self.last is None or opset <= self.last)


def _differs(a: Dims | None, b: Dims | None) -> bool:
    """Two shapes certainly differ: both ranks known and unequal, or a dim known in both
    and unequal."""
    if a is None or b is None:
        return False
    if len(a) != len(b):
        return True
    return any(x is not None and y is not None and x != y for x, y in zip(a, b, strict=True))


def _ranks_differ(a: Operand, b: Operand) -> bool:
    return a.rank is not None and b.rank is not None and a.rank != b.rank


def _not_divisible(dim: int | None, by: int) -> bool:
    return dim is not None and by > 0 and dim % by != 0


def _length(o: Operand) -> int | None:
    """Elements of a 1-D operand, from its shape or its constant value."""
    if o.value is not None:
        return int(o.value.size)
    return o.dim(0) if o.rank == 1 else None


def _not_vector_of(o: Operand, n: int | None) -> bool:
    """`o` is certainly not a 1-D tensor of `n` elements (n None: of any length)."""
    if o.rank is None:
        return False
    return o.rank != 1 or (n is not None and o.dim(0) is not None and o.dim(0) != n)


def _not_scalar(o: Operand) -> bool:
    return o.rank is not None and o.rank != 0


def _one_of(attr: str, allowed: Sequence[Any], default: Any) -> Predicate:
    return lambda n: n.attrs.get(attr, default) not in allowed


def _affine_theta(size_len: int, matrix: tuple[int, int]) -> Predicate:
    def violated(n: NodeFacts) -> bool:
        theta = n.input(0)
        if _length(n.input(1)) != size_len or theta.shape is None:
            return False
        return theta.rank != 3 or _differs(theta.shape[1:], matrix)

    return violated


def _affine_batch(n: NodeFacts) -> bool:
    size = n.input(1).value
    batch = n.input(0).dim(0)
    return size is not None and size.size >= 1 and batch is not None and int(size.flat[0]) != batch


def _stft_onesided(n: NodeFacts) -> bool:
    return n.attrs.get("onesided", 1) == 1 and n.input(0).dim(-1) == 2


def _stft_signal(n: NodeFacts) -> bool:
    signal = n.input(0)
    return signal.rank is not None and (signal.rank != 3 or signal.dim(-1) not in (1, 2, None))


def _conv_channels(n: NodeFacts) -> bool:
    c, wc = n.input(0).dim(1), n.input(1).dim(1)
    return c is not None and wc is not None and c != wc * n.attrs.get("group", 1)


def _conv_kernel(n: NodeFacts) -> bool:
    kernel = n.attrs.get("kernel_shape")
    w = n.input(1)
    return kernel is not None and w.shape is not None and _differs(tuple(kernel), w.shape[2:])


def _conv_pads_with_auto_pad(n: NodeFacts) -> bool:
    return "pads" in n.attrs and n.attrs.get("auto_pad", "NOTSET") != "NOTSET"


def _convtranspose_output_padding(n: NodeFacts) -> bool:
    """Less than the stride or the dilation on each axis: the sentence says "stride/dilation",
    and onnxruntime and PyTorch both accept a padding below either one."""
    padding = n.attrs.get("output_padding")
    if not padding:
        return False
    strides = n.attrs.get("strides") or [1] * len(padding)
    dilations = n.attrs.get("dilations") or [1] * len(padding)
    return any(p >= max(s, d) for p, s, d in zip(padding, strides, dilations, strict=False))


def _convtranspose_channels(n: NodeFacts) -> bool:
    c, wc = _channels(n), n.input(1).dim(0)
    return c is not None and wc is not None and c != wc


def _scatter_nd_depth(n: NodeFacts) -> bool:
    k, rank = n.input(1).dim(-1), n.input(0).rank
    return k is not None and rank is not None and k > rank


def _scatter_nd_updates(n: NodeFacts) -> bool:
    data, indices, updates = n.input(0), n.input(1), n.input(2)
    k = indices.dim(-1)
    if data.shape is None or indices.shape is None or k is None or k > len(data.shape):
        return False
    return _differs(updates.shape, indices.shape[:-1] + data.shape[k:])


def _depth_to_space(n: NodeFacts) -> bool:
    block = n.attrs.get("blocksize", 0)
    return _not_divisible(n.input(0).dim(1), block * block) if n.input(0).rank == 4 else False


def _space_to_depth(n: NodeFacts) -> bool:
    block, x = n.attrs.get("blocksize", 0), n.input(0)
    return x.rank == 4 and (_not_divisible(x.dim(2), block) or _not_divisible(x.dim(3), block))


def _channels(n: NodeFacts) -> int | None:
    return n.input(0).dim(1) if (n.input(0).rank or 0) >= 2 else None


def _per_channel(*inputs: int) -> Predicate:
    return lambda n: any(n.has(i) and _not_vector_of(n.input(i), _channels(n)) for i in inputs)


def _gemm_c(n: NodeFacts) -> bool:
    a, b, c = n.input(0), n.input(1), n.input(2)
    if not n.has(2) or c.shape is None or a.rank != 2 or b.rank != 2:
        return False
    m = a.dim(1) if n.attrs.get("transA", 0) else a.dim(0)
    cols = b.dim(0) if n.attrs.get("transB", 0) else b.dim(1)
    if len(c.shape) > 2:
        return True
    return any(
        d is not None and t is not None and d not in (1, t) for d, t in zip(c.shape[::-1], (cols, m), strict=False)
    )


def _zero_point_shape(n: NodeFacts) -> bool:
    return n.has(2) and _differs(n.input(2).shape, n.input(1).shape)


def _blocked_scale(n: NodeFacts) -> bool:
    """A blocked scale (`block_size` > 0) of another rank than x, another dim off the blocked
    axis, or a block size outside [ceil(Di/Si), ceil(Di/(Si-1)) - 1]: a number of blocks
    that leaves a block empty, or one that does not cover the axis."""
    block = int(n.attrs.get("block_size", 0))
    x, scale = n.input(0), n.input(1)
    if block <= 0 or x.shape is None or scale.shape is None:
        return False
    if len(x.shape) != len(scale.shape) or not x.shape:
        return True
    axis = int(n.attrs.get("axis", 1))
    if not -len(x.shape) <= axis < len(x.shape):
        return False  # the axis rule's to say
    axis %= len(x.shape)
    off_axis = tuple(d for i, d in enumerate(x.shape) if i != axis)
    if _differs(off_axis, tuple(d for i, d in enumerate(scale.shape) if i != axis)):
        return True
    di, si = x.shape[axis], scale.shape[axis]
    if di is None or si is None:
        return False
    return block < -(-di // max(si, 1)) or (si > 1 and block > -(-di // (si - 1)) - 1) or (si == 0) != (di == 0)


def _rank_one_blocked(n: NodeFacts) -> bool:
    x, scale = n.input(0), n.input(1)
    one = scale.shape is not None and all(d == 1 for d in scale.shape)
    return int(n.attrs.get("block_size", 0)) > 0 and x.rank == 1 and one


def _mod_float_fmod(n: NodeFacts) -> bool:
    floats = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
    return n.attrs.get("fmod", 0) == 0 and n.input(0).elem_type in floats


def _axis_out_of_rank(n: NodeFacts) -> bool:
    """`axis` (default -1) outside [-r, r) for an input of rank r."""
    rank, axis = n.input(0).rank, n.attrs.get("axis", -1)
    return rank is not None and not -rank <= axis < rank


def _reverse_time_axis(n: NodeFacts) -> bool:
    time, batch = n.attrs.get("time_axis", 0), n.attrs.get("batch_axis", 1)
    return time not in (0, 1) or time == batch


def _reverse_lengths(n: NodeFacts) -> bool:
    batch = n.attrs.get("batch_axis", 1)
    return batch in (0, 1) and _not_vector_of(n.input(1), n.input(0).dim(batch))


def _one_element_value(n: NodeFacts) -> bool:
    value = n.attrs.get("value")
    return isinstance(value, onnx.TensorProto) and numpy_helper.to_array(value).size != 1


def _deform_groups(n: NodeFacts) -> bool:
    group = n.attrs.get("group", 1)
    return _not_divisible(_channels(n), group) or _not_divisible(n.input(1).dim(0), group)


def _einsum_output_ellipses(n: NodeFacts) -> bool:
    equation = str(n.attrs.get("equation", ""))
    return "->" in equation and equation.split("->", 1)[1].count("...") > 1


_C = SpecConstraint
CONSTRAINTS: tuple[SpecConstraint, ...] = (
    _C(
        "AffineGrid",
        20,
        None,
        "input batch of affine matrices with shape (N, 2, 3) for 2D or (N, 3, 4) for 3D",
        "theta must be (N, 2, 3) for a 4-element size",
        _affine_theta(4, (2, 3)),
    ),
    _C(
        "AffineGrid",
        20,
        None,
        "input batch of affine matrices with shape (N, 2, 3) for 2D or (N, 3, 4) for 3D",
        "theta must be (N, 3, 4) for a 5-element size",
        _affine_theta(5, (3, 4)),
    ),
    _C(
        "AffineGrid",
        20,
        None,
        "the target output image size (N, C, H, W) for 2D or (N, C, D, H, W) for 3D",
        "a constant size's N must equal theta's N",
        _affine_batch,
    ),
    _C(
        "DFT",
        17,
        None,
        "For complex input, the following shape is expected:",
        "the input's last dim must be 1 (real) or 2 (complex)",
        lambda n: n.input(0).dim(-1) not in (1, 2, None),
    ),
    _C(
        "STFT",
        17,
        None,
        "Note if the input or window tensors are complex, then onesided output is not possible.",
        "onesided=1 (the default) needs a real signal (last dim 1)",
        _stft_onesided,
    ),
    _C(
        "STFT",
        17,
        None,
        "The tensor is expected to have rank 3.",
        "the signal must have rank 3 and a last dim of 1 or 2",
        _stft_signal,
    ),
    _C(
        "STFT",
        17,
        None,
        "- `frame_step` must be a scalar.",
        "frame_step must be a scalar",
        lambda n: _not_scalar(n.input(1)),
    ),
    _C(
        "Conv",
        11,
        None,
        "Assuming zero based indices for the shape array, X.shape[1] == (W.shape[1] * group) == C",
        "X.shape[1] must equal W.shape[1] * group",
        _conv_channels,
    ),
    _C(
        "Conv",
        11,
        None,
        "W.shape[0] mod G == 0",
        "W.shape[0] must divide by group",
        lambda n: _not_divisible(n.input(1).dim(0), n.attrs.get("group", 1)),
    ),
    _C(
        "Conv",
        1,
        None,
        "Optional 1D bias to be added to the convolution, has size of M.",
        "B must have W.shape[0] elements",
        lambda n: n.has(2) and _not_vector_of(n.input(2), n.input(1).dim(0)),
    ),
    _C(
        "Conv",
        1,
        None,
        "The shape of the convolution kernel. If not present, should be inferred from input W.",
        "kernel_shape must equal W.shape[2:]",
        _conv_kernel,
    ),
    _C(
        "Conv",
        1,
        None,
        "auto_pad must be either NOTSET, SAME_UPPER, SAME_LOWER or VALID.",
        "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID",
        _one_of("auto_pad", ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"), "NOTSET"),
    ),
    _C(
        "Conv",
        1,
        None,
        "This attribute cannot be used simultaneously with auto_pad attribute.",
        "pads must not be given with an auto_pad other than NOTSET",
        _conv_pads_with_auto_pad,
    ),
    _C(
        "ConvTranspose",
        11,
        None,
        'Each padding value in "output_padding" must be less than the corresponding stride/dilation dimension.',
        "output_padding must be less than the stride or the dilation on each axis",
        _convtranspose_output_padding,
    ),
    _C(
        "ConvTranspose",
        1,
        None,
        "has size (C x M/group x kH x kW)",
        "W.shape[0] must equal X.shape[1]",
        _convtranspose_channels,
    ),
    _C(
        "ScatterElements",
        11,
        None,
        "Tensor of rank r >=1 (same rank and shape as indices)",
        "updates must have the shape of indices",
        lambda n: _differs(n.input(2).shape, n.input(1).shape),
    ),
    _C(
        "ScatterElements",
        11,
        None,
        "Tensor of int32/int64 indices, of r >= 1 (same rank as input).",
        "indices must have the rank of data",
        lambda n: _ranks_differ(n.input(1), n.input(0)),
    ),
    _C(
        "ScatterND",
        11,
        None,
        "Thus, the shape of `updates` must equal indices.shape[0:q-1] ++ data.shape[k:r]",
        "updates.shape must equal indices.shape[:-1] + data.shape[k:]",
        _scatter_nd_updates,
    ),
    _C(
        "ScatterND",
        11,
        None,
        "Hence, k can be a value at most the rank of `data`.",
        "indices.shape[-1] must be at most the rank of data",
        _scatter_nd_depth,
    ),
    _C(
        "GatherElements",
        11,
        None,
        "Tensor of int32/int64 indices, with the same rank r as the input.",
        "indices must have the rank of data",
        lambda n: _ranks_differ(n.input(1), n.input(0)),
    ),
    _C(
        "DepthToSpace",
        1,
        None,
        "Output tensor of [N, C/(blocksize * blocksize), H * blocksize, W * blocksize].",
        "C must divide by blocksize * blocksize",
        _depth_to_space,
    ),
    _C(
        "DepthToSpace",
        11,
        None,
        "DCR (default) for depth-column-row order re-arrangement. Use CRD for column-row-depth order.",
        "mode must be DCR or CRD",
        _one_of("mode", ("DCR", "CRD"), "DCR"),
    ),
    _C(
        "SpaceToDepth",
        1,
        None,
        "Output tensor of [N, C * blocksize * blocksize, H/blocksize, W/blocksize].",
        "H and W must divide by blocksize",
        _space_to_depth,
    ),
    _C(
        "GroupNormalization",
        18,
        None,
        "It should be a divisor of the number of channels `C`.",
        "C must divide by num_groups",
        lambda n: _not_divisible(_channels(n), n.attrs.get("num_groups", 0)),
    ),
    _C(
        "GroupNormalization",
        21,
        None,
        "Scale tensor of shape `(C)`.",
        "scale and bias must have C elements",
        _per_channel(1, 2),
    ),
    _C(
        "InstanceNormalization",
        1,
        None,
        "The input 1-dimensional scale tensor of size C.",
        "scale and B must have C elements",
        _per_channel(1, 2),
    ),
    _C(
        "Gemm",
        7,
        None,
        "The shape of C should be unidirectional broadcastable to (M, N).",
        "C must broadcast to (M, N)",
        _gemm_c,
    ),
    _C(
        "Split",
        18,
        None,
        "Number of outputs to split parts of the tensor into.",
        "num_outputs must equal the number of outputs",
        lambda n: "num_outputs" in n.attrs and n.attrs["num_outputs"] != n.outputs,
    ),
    _C(
        "QuantizeLinear",
        21,
        None,
        "Shape must match `y_scale`.",
        "y_zero_point must have the shape of y_scale",
        _zero_point_shape,
    ),
    _C(
        "QuantizeLinear",
        21,
        None,
        "the accepted range is `[ceil(Di/Si), ceil(Di/(Si-1))-1]`",
        "a blocked y_scale has x's shape but on axis, where block_size fits its number of blocks",
        _blocked_scale,
    ),
    _C(
        "QuantizeLinear",
        21,
        None,
        "When the rank of the input is 1, per-tensor quantization is applied",
        "a rank-1 input with a one-element scale is quantized per tensor, with no block_size",
        _rank_one_blocked,
    ),
    _C(
        "DequantizeLinear",
        21,
        None,
        "the accepted range is `[ceil(Di/Si), ceil(Di/(Si-1))-1]`",
        "a blocked x_scale has x's shape but on axis, where block_size fits its number of blocks",
        _blocked_scale,
    ),
    _C(
        "DequantizeLinear",
        13,
        None,
        "Shape must match x_scale.",
        "x_zero_point must have the shape of x_scale",
        _zero_point_shape,
    ),
    _C(
        "MaxPool",
        1,
        None,
        "This attribute cannot be used simultaneously with auto_pad attribute.",
        "pads must not be given with an auto_pad other than NOTSET",
        _conv_pads_with_auto_pad,
    ),
    _C(
        "MaxPool",
        8,
        None,
        "0 is row major, and 1 is column major.",
        "storage_order must be 0 or 1",
        _one_of("storage_order", (0, 1), 0),
    ),
    _C(
        "GridSample",
        16,
        19,
        "Currently, only spatial (4-D) inputs are supported.",
        "X must be 4-D",
        lambda n: n.input(0).rank not in (None, 4),
    ),
    _C(
        "GridSample",
        20,
        None,
        "Three interpolation modes: linear (default), nearest and cubic.",
        "mode must be linear, nearest or cubic",
        _one_of("mode", ("linear", "nearest", "cubic"), "linear"),
    ),
    _C(
        "GridSample",
        16,
        None,
        "Support padding modes for outside grid values: `zeros`(default), `border`, `reflection`.",
        "padding_mode must be zeros, border or reflection",
        _one_of("padding_mode", ("zeros", "border", "reflection"), "zeros"),
    ),
    _C(
        "Pad",
        19,
        None,
        "Supported modes: `constant`(default), `reflect`, `edge`, `wrap`",
        "mode must be constant, reflect, edge or wrap",
        _one_of("mode", ("constant", "reflect", "edge", "wrap"), "constant"),
    ),
    _C(
        "Resize",
        18,
        None,
        'Three interpolation modes: "nearest" (default), "linear" and "cubic".',
        "mode must be nearest, linear or cubic",
        _one_of("mode", ("nearest", "linear", "cubic"), "nearest"),
    ),
    _C(
        "Resize",
        18,
        None,
        'Four modes: "round_prefer_floor" (default, as known as round half down),'
        ' "round_prefer_ceil" (as known as round half up), "floor", "ceil".',
        "nearest_mode must be round_prefer_floor, round_prefer_ceil, floor or ceil",
        _one_of("nearest_mode", ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"), "round_prefer_floor"),
    ),
    _C(
        "BitShift",
        11,
        None,
        'It can be either "RIGHT" (for right shift) or "LEFT" (for left shift).',
        "direction must be RIGHT or LEFT",
        _one_of("direction", ("RIGHT", "LEFT"), "RIGHT"),
    ),
    _C(
        "LSTM",
        1,
        None,
        "Must be one of forward (default), reverse, or bidirectional.",
        "direction must be forward, reverse or bidirectional",
        _one_of("direction", ("forward", "reverse", "bidirectional"), "forward"),
    ),
    _C("Unique", 11, None, "Must be one of 0, or 1 (default).", "sorted must be 0 or 1", _one_of("sorted", (0, 1), 1)),
    _C(
        "LpNormalization",
        1,
        None,
        "The order of the normalization, only 1 or 2 are supported.",
        "p must be 1 or 2",
        _one_of("p", (1, 2), 2),
    ),
    _C(
        "LayerNormalization",
        17,
        None,
        "If rank(X) is r, axis' allowed range is [-r, r).",
        "axis must be in [-r, r)",
        _axis_out_of_rank,
    ),
    _C(
        "Mod",
        13,
        27,
        "If the `fmod` attribute is set to `0`, `T` is constrained to integer data types",
        "a float input needs fmod=1",
        _mod_float_fmod,
    ),
    _C(
        "Mod",
        13,
        27,
        "The semantics and supported data types depend on the value of the `fmod` attribute"
        " which must be `0` (default), or `1`.",
        "fmod must be 0 or 1",
        _one_of("fmod", (0, 1), 0),
    ),
    _C("Mod", 28, None, "Its value must be `0` (default) or `1`.", "fmod must be 0 or 1", _one_of("fmod", (0, 1), 0)),
    _C(
        "Trilu",
        14,
        None,
        "A 0-D tensor containing a single value",
        "k must be 0-D",
        lambda n: n.has(1) and _not_scalar(n.input(1)),
    ),
    _C("CumSum", 11, None, "A 0-D tensor.", "axis must be 0-D", lambda n: _not_scalar(n.input(1))),
    _C(
        "Clip",
        11,
        None,
        "It must be a scalar(tensor of empty shape).",
        "min and max must be scalars",
        lambda n: any(n.has(i) and _not_scalar(n.input(i)) for i in (1, 2)),
    ),
    _C(
        "Compress",
        9,
        None,
        "Rank 1 tensor of booleans",
        "condition must be 1-D",
        lambda n: n.input(1).rank not in (None, 1),
    ),
    _C(
        "Tile",
        6,
        None,
        "1D int64 tensor of the same length as input's dimension number",
        "repeats must have one element per input dim",
        lambda n: _not_vector_of(n.input(1), n.input(0).rank),
    ),
    _C(
        "MaxUnpool",
        9,
        None,
        "Dimensions must be the same as input tensor X.",
        "I must have the shape of X",
        lambda n: _differs(n.input(1).shape, n.input(0).shape),
    ),
    _C(
        "RoiAlign",
        10,
        None,
        "Two modes are supported: 'avg' and 'max'.",
        "mode must be avg or max",
        _one_of("mode", ("avg", "max"), "avg"),
    ),
    _C(
        "RoiAlign",
        16,
        None,
        "Allowed values are 'half_pixel' and 'output_half_pixel'.",
        "coordinate_transformation_mode must be half_pixel or output_half_pixel",
        _one_of("coordinate_transformation_mode", ("half_pixel", "output_half_pixel"), "half_pixel"),
    ),
    _C(
        "NonMaxSuppression",
        10,
        None,
        "Integer indicate the format of the box data.",
        "center_point_box must be 0 or 1",
        _one_of("center_point_box", (0, 1), 0),
    ),
    _C(
        "NonMaxSuppression",
        10,
        None,
        "An input tensor with shape [num_batches, spatial_dimension, 4].",
        "boxes' last dim must be 4",
        lambda n: n.input(0).dim(-1) not in (None, 4),
    ),
    _C(
        "ReverseSequence",
        10,
        None,
        "Must be one of 1 (default), or 0.",
        "batch_axis must be 0 or 1",
        _one_of("batch_axis", (0, 1), 1),
    ),
    _C(
        "ReverseSequence",
        10,
        None,
        "Must be one of 0 (default), or 1.",
        "time_axis must be 0 or 1 and differ from batch_axis",
        _reverse_time_axis,
    ),
    _C(
        "ReverseSequence",
        10,
        None,
        "It has shape `[batch_size]`.",
        "sequence_lens must have input.shape[batch_axis] elements",
        _reverse_lengths,
    ),
    _C(
        "Col2Im",
        18,
        None,
        "it can take any value greater than or equal to 0.",
        "pads must not be negative",
        lambda n: any(p < 0 for p in n.attrs.get("pads", ())),
    ),
    _C(
        "ConstantOfShape", 9, None, "Should be a one-element tensor.", "value must hold one element", _one_element_value
    ),
    _C(
        "DeformConv",
        19,
        None,
        "C must be divisible by offset_group.",
        "C must divide by offset_group",
        lambda n: _not_divisible(_channels(n), n.attrs.get("offset_group", 1)),
    ),
    _C(
        "DeformConv",
        19,
        None,
        "C and oC must both be divisible by group.",
        "C and oC must divide by group",
        _deform_groups,
    ),
    _C(
        "LpNormalization",
        1,
        None,
        "The axis on which to apply normalization, -1 mean last axis.",
        "axis must be in [-r, r)",
        _axis_out_of_rank,
    ),
    _C(
        "Einsum",
        12,
        None,
        "The right-hand side may contain exactly one ellipsis.",
        "the right-hand side holds at most one ellipsis",
        _einsum_output_ellipses,
    ),
)


def constraints_for(op_type: str, opset: int) -> list[SpecConstraint]:
    """The constraints a default-domain node of `op_type` must keep in a model importing `opset`."""
    return [c for c in CONSTRAINTS if c.op_type == op_type and c.applies(opset)]


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _typed(value_type: onnx.TypeProto) -> Operand:
    if not value_type.HasField("tensor_type"):
        return UNKNOWN
    t = value_type.tensor_type
    if not t.HasField("shape"):
        return Operand(None, t.elem_type)
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    return Operand(dims, t.elem_type)


def _constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Tensors whose values the model fixes: initializers no graph input overrides, and
    Constant nodes' `value`."""
    fed = {v.name for v in graph.input}
    found = {i.name: numpy_helper.to_array(i) for i in graph.initializer if i.name not in fed}
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    found[n.output[0]] = numpy_helper.to_array(a.t)
    return found


def _operands(model: onnx.ModelProto) -> dict[str, Operand]:
    """Every main-graph tensor's known shape and type: inferred where onnx can (non-strict,
    so one node it cannot infer does not cost the rest), else as the model declares."""
    try:
        graph = onnx_checks.infer_shapes(model, data_prop=True).graph
    except (onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        graph = model.graph
    known = {v.name: _typed(v.type) for v in [*graph.value_info, *graph.output, *graph.input]}
    constants = _constants(model.graph)
    for init in model.graph.initializer:
        known.setdefault(init.name, Operand(tuple(init.dims), init.data_type))
    for name, value in constants.items():
        elem = known.get(name, UNKNOWN).elem_type or helper.np_dtype_to_tensor_dtype(value.dtype)
        known[name] = Operand(tuple(value.shape), elem, value)
    return known


def _facts(node: onnx.NodeProto, operands: Mapping[str, Operand]) -> NodeFacts:
    inputs = tuple(operands.get(i, UNKNOWN) if i else UNKNOWN for i in node.input)
    present = tuple(bool(i) for i in node.input)
    outputs = sum(1 for o in node.output if o)
    return NodeFacts(node.op_type, node.name, _attrs(node), inputs, present, outputs)


@dataclass(frozen=True)
class Violation:
    """One node holding one undefined form."""

    node: str
    constraint: SpecConstraint

    def line(self) -> str:
        c = self.constraint
        return f"{c.op_type} node {self.node!r}: {c.statement} (schema: '{c.sentence}')"


def _opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def violations(model: onnx.ModelProto) -> list[Violation]:
    """Each (node, constraint) of the main graph where the node holds a form the schema
    leaves undefined; nodes in subgraphs (If, Loop, Scan bodies) are not read."""
    opset = _opset(model)
    if opset is None:
        return []
    nodes = [n for n in model.graph.node if n.domain in ("", "ai.onnx") and constraints_for(n.op_type, opset)]
    if not nodes:
        return []
    operands = _operands(model)
    found: list[Violation] = []
    for n in nodes:
        facts = _facts(n, operands)
        found += [Violation(n.name, c) for c in constraints_for(n.op_type, opset) if c.violated(facts)]
    return found


def undefined_forms(model: onnx.ModelProto) -> list[str]:
    """One line per undefined form a main-graph node holds (a node holding two gives two)."""
    return [v.line() for v in violations(model)]


def undefined_keys(model: onnx.ModelProto) -> frozenset[str]:
    """The model's undefined forms by `SpecConstraint.key`, which outlive node renames."""
    return frozenset(v.constraint.key for v in violations(model))
