"""The torch reference against onnx.reference.ReferenceEvaluator, form by form.

The torch reference is fuzzbot's oracle: a form it gets wrong turns into false bug reports
against every backend, and a form it cannot compute hides real ones. A handful of models per
op and dtype (what the family tests check) leaves most forms unseen, and a reducer or a user
model can hold forms the generator seldom or never emits. So the forms come from the
generator's own catalogue: single-op models over many seeds per registered op x declared
dtype, until PATIENCE seeds in a row bring no new form (or SEED_CAP seeds have been tried);
the forms it never emits but reduced and user models contain are built by hand (hand_built,
scalar_form).

A form is what a reference implementation branches on, read off the emitted node: the op,
its key dtype and schema version, the rank of its first input, for every other input slot
whether it is present, its dtype, whether it is a scalar and whether an op-owned integer
constant holds a negative value, every output slot's presence and dtype, and every
attribute's value class (strings as written, ints as 0/1/>1 or, for axes, by sign, int
lists as all-0/all-1/negative/other, floats by sign).

onnx.reference has defects of its own; EVALUATOR_DEFECTS lists them by form pattern. A form
they cover is still computed by the torch reference (it must not fail), only the comparison is
skipped; every listed defect must still show on some form, with something independent
(onnxruntime, the evaluator on a uint8 copy of a bool model, a worked-out answer) siding with the
torch reference there, so the list can neither go stale nor hide a torch bug.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from backends.reference import run_reference, trace_reference
from generator.api import GenConfig, generate
from generator.dtypes import DType
from generator.emit import IR_VERSION
from generator.ops import registry
from generator.ops.base import OLDEST_WRITTEN, OpSpec, op_version
from generator.symbolic import TType
from generator.values import NoValidValues
from tests.op_family import classic_dtypes

SPECS = dict(sorted(registry().items()))
PATIENCE = 8
"""Seeds in a row without a new form after which an op x dtype counts as saturated."""
SEED_CAP = 36
"""The most seeds tried per op x dtype: with PATIENCE, what keeps the file under a minute."""
SEED_CAP_FOR = {"ConvTranspose": 12}
"""Ops whose models take ~70 ms to generate and ~80 ms for the evaluator to run."""
MAX_ELEMENTS = 1024
"""Tensor cap of the generated models: forms do not depend on size, the evaluator's loops do."""
TOP_OPSET = max(IR_VERSION)
"""The newest opset the generator writes."""

Form = tuple[tuple[str, str], ...]


@dataclass
class Instance:
    """One model holding one node of `op`: its form and what it computes."""

    op: str
    dtype: DType
    opset: int
    origin: str
    """"seed N" for a generated model, the hand-built form's name otherwise."""
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    expected: dict[str, np.ndarray] | None = None
    """The right answer of a hand-built form, where it is worked out independently."""

    @functools.cached_property
    def node(self) -> onnx.NodeProto:
        found: onnx.NodeProto = next(n for n in self.model.graph.node if n.op_type == self.op)
        return found

    @functools.cached_property
    def values(self) -> dict[str, np.ndarray]:
        inits = {i.name: numpy_helper.to_array(i) for i in self.model.graph.initializer}
        known = {**inits, **self.inputs}
        if all(n in known for n in self.node.input if n):
            return known
        # An op written with the nodes that feed it (NonZero after Shape and Expand): its
        # inputs are computed, by the reference, up to where it stops.
        trace = trace_reference(self.model, self.inputs)
        computed = {k: a for k in trace.env for a in [trace.numpy(k)] if a is not None}
        return {**computed, **known}

    @functools.cached_property
    def features(self) -> dict[str, str]:
        return _features(self)

    @functools.cached_property
    def defects(self) -> list[Pattern]:
        return [p for p in EVALUATOR_DEFECTS if p.matches(self)]

    @functools.cached_property
    def form(self) -> Form:
        """The features, and which known evaluator defects apply: a form inside a defect's
        pattern and the same form outside it are checked separately."""
        known = (("known", "+".join(str(p) for p in self.defects)),) if self.defects else ()
        return (*self.features.items(), *known)

    def attr(self, name: str, default: Any = None) -> Any:
        for a in self.node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                return value.decode() if isinstance(value, bytes) else value
        return default

    def value(self, slot: int) -> np.ndarray | None:
        name = self.node.input[slot] if slot < len(self.node.input) else ""
        return self.values[name] if name else None


def _int_class(name: str, v: int) -> str:
    """Flags and modes are 0 or 1 and branch on it; larger values (sizes, groups, types) only
    scale what the code does, and an axis branches on its sign alone."""
    if v < 0:
        return "neg"
    if "axis" in name:
        return "nonneg"
    return str(v) if v <= 1 else ">1"


def _ints_class(values: Sequence[int]) -> str:
    if not values:
        return "[]"
    if any(v < 0 for v in values):
        return "neg"
    if all(v == 0 for v in values):
        return "0"
    return "1" if all(v == 1 for v in values) else "+"


def _attr_class(a: onnx.AttributeProto) -> str:
    v = helper.get_attribute_value(a)
    if a.type == onnx.AttributeProto.INT:
        return _int_class(a.name, int(v))
    if a.type == onnx.AttributeProto.FLOAT:
        return "neg" if v < 0 else "0" if v == 0 else "pos"
    if a.type == onnx.AttributeProto.STRING:
        return str(v.decode())
    if a.type == onnx.AttributeProto.INTS:
        return _ints_class([int(i) for i in v])
    return "given"


def _features(inst: Instance) -> dict[str, str]:
    node = inst.node
    feats = {
        "op": inst.op,
        "dtype": inst.dtype.value,
        "v": str(onnx.defs.get_schema(inst.op, inst.opset).since_version),
    }
    owned = {i.name for i in inst.model.graph.initializer if i.name.startswith("c")}
    for i, name in enumerate(node.input):
        if not name:
            feats[f"in{i}"] = "-"
            continue
        a = inst.values[name]
        if i == 0:
            feats["in0"] = f"{a.dtype}/{a.ndim}"
            continue
        sign = "/neg" if name in owned and a.dtype.kind in "iu" and bool((a < 0).any()) else ""
        feats[f"in{i}"] = f"{a.dtype}/{'0d' if a.ndim == 0 else 'nd'}{sign}"
    types = {o.name: o.type.tensor_type.elem_type for o in inst.model.graph.output}
    for i, name in enumerate(node.output):
        feats[f"out{i}"] = "-" if not name else DType.from_onnx(types[name]).value if name in types else "?"
    for a in sorted(node.attribute, key=lambda a: a.name):
        feats[f"@{a.name}"] = _attr_class(a)
    return feats


def describe(form: Form) -> str:
    return " ".join(v if k in ("op", "dtype") else f"{k}={v}" for k, v in form)


Predicate = Callable[[Instance], bool]


@dataclass(frozen=True)
class Pattern:
    """Forms of one op, narrowed by dtype, attribute value classes (as in the form: a
    missing attribute reads as "-") and a condition on the node's inputs."""

    op: str
    dtype: DType | None = None
    attrs: tuple[tuple[str, str], ...] = ()
    where: Predicate | None = None

    def matches(self, inst: Instance) -> bool:
        return (
            inst.op == self.op
            and (self.dtype is None or inst.dtype is self.dtype)
            and all(inst.features.get(f"@{k}", "-") == v for k, v in self.attrs)
            and (self.where is None or self.where(inst))
        )

    def __str__(self) -> str:
        parts = [self.op, *([self.dtype.value] if self.dtype else [])]
        parts += [f"{k}={v}" for k, v in self.attrs]
        return "/".join(parts + ([self.where.__name__.strip("_")] if self.where else []))


def _unit_strides(i: Instance) -> bool:
    return all(v == 1 for v in [*i.attr("strides", []), *i.attr("dilations", [])])


def _same_upper_unit_strides(i: Instance) -> bool:
    return bool(i.attr("auto_pad") == "SAME_UPPER" and _unit_strides(i))


def _explicit_pads_unit_strides(i: Instance) -> bool:
    return any(i.attr("pads", [])) and _unit_strides(i)


def _integer_unpadded_unit_strides(i: Instance) -> bool:
    return (
        i.dtype in (DType.int8, DType.uint8)
        and _unit_strides(i)
        and i.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID")
        and not any(i.attr("pads", []))
    )


def _window(i: Instance) -> list[tuple[int, int, int, int, int, int]]:
    """Per spatial dim: (size, kernel, stride, dilation, begin pad, end pad)."""
    x = i.value(0)
    assert x is not None
    n = x.ndim - 2
    k, s = i.attr("kernel_shape"), i.attr("strides", [1] * n)
    d, p = i.attr("dilations", [1] * n), i.attr("pads", [0] * 2 * n)
    return [(x.shape[2 + j], k[j], s[j], d[j], p[j], p[j + n]) for j in range(n)]


def _ceil_overhang_of_two(i: Instance) -> bool:
    """A ceil-mode window that reaches two or more cells past the end padding."""
    if not i.attr("ceil_mode", 0):
        return False
    for x, k, s, d, pb, pe in _window(i):
        extent = (k - 1) * d + 1
        out = -(-(x + pb + pe - extent) // s) + 1
        out -= (out - 1) * s >= x + pb
        if (out - 1) * s + extent - (x + pb + pe) >= 2:
            return True
    return False


def _valid_dilation_changes_the_size(i: Instance) -> bool:
    return i.attr("auto_pad") == "VALID" and any(
        (x - (k - 1) * d - 1) // s != (x - k) // s for x, k, s, d, _, _ in _window(i)
    )


def _mixed_groups(i: Instance) -> bool:
    """Grouped, and not the one layout the evaluator's slicing gets right: M = C = group, no bias."""
    x, w, g = i.value(0), i.value(1), int(i.attr("group", 1))
    assert x is not None and w is not None
    return g > 1 and (w.shape[1] != 1 or x.shape[1] != g or i.value(2) is not None)


def _first_input_broadcasts(i: Instance) -> bool:
    shapes = [a.shape for a in (i.value(k) for k in range(len(i.node.input))) if a is not None]
    return shapes[0] != np.broadcast_shapes(*shapes)


def _batch_is_not_channels(i: Instance) -> bool:
    x = i.value(0)
    return x is not None and x.shape[0] != x.shape[1]


def _not_rank_4(i: Instance) -> bool:
    x = i.value(0)
    return x is not None and x.ndim != 4


def _version(i: Instance) -> int:
    return int(onnx.defs.get_schema(i.op, i.opset).since_version)


def _before_13(i: Instance) -> bool:
    return _version(i) < 13


def _before_14(i: Instance) -> bool:
    return _version(i) < 14


def _before_16(i: Instance) -> bool:
    return _version(i) < 16


def _axes_taken_one_by_one_elsewhere(i: Instance) -> bool:
    """Squeeze-11's or Unsqueeze-11's axes attribute names other axes when taken one at a time
    as the evaluator takes them: in the order written (Squeeze's reversed), each counted in the
    rank reached so far."""
    axes, x = i.attr("axes"), i.value(0)
    if axes is None or x is None:
        return False
    rank = x.ndim + (len(axes) if i.op == "Unsqueeze" else 0)
    meant = sorted(a % rank for a in axes)
    if i.op == "Unsqueeze":
        places: list[int | None] = list(range(x.ndim))  # None marks an inserted axis
        for a in axes:
            if not -len(places) - 1 <= a <= len(places):
                return True  # out of the rank reached: numpy raises
            places.insert(a if a >= 0 else len(places) + 1 + a, None)
        return [k for k, p in enumerate(places) if p is None] != meant
    left = list(range(x.ndim))
    taken = [left.pop(a) for a in reversed(axes) if -len(left) <= a < len(left)]
    return sorted(taken) != meant


def _resizes(i: Instance) -> bool:
    """Some axis changes length: an identity Resize returns before reading the mapping."""
    scales, sizes, x = i.value(2), i.value(3), i.value(0)
    if scales is not None and scales.size:
        return bool((scales != 1).any())
    return sizes is not None and x is not None and list(sizes) != list(x.shape)[-len(sizes) :]


def _rank_1_depth(i: Instance) -> bool:
    depth = i.value(1)
    return depth is not None and depth.ndim == 1


def _bool_values(i: Instance) -> bool:
    values = i.value(2)
    return values is not None and values.dtype == np.bool_


def _negative_pads(i: Instance) -> bool:
    pads = i.value(1)
    return pads is not None and bool((pads < 0).any())


def _gather_axis(i: Instance) -> int:
    x = i.value(0)
    assert x is not None
    return int(i.attr("axis", 0)) % x.ndim


def _narrower_indices(i: Instance) -> bool:
    x, idx = i.value(0), i.value(1)
    assert x is not None and idx is not None
    axis = _gather_axis(i)
    return any(a != b for k, (a, b) in enumerate(zip(idx.shape, x.shape, strict=True)) if k != axis)


def _axis_of_64_or_more(i: Instance) -> bool:
    x = i.value(0)
    return x is not None and x.shape[_gather_axis(i)] >= 64


def _scalar(i: Instance) -> bool:
    x = i.value(0)
    return x is not None and x.ndim == 0


def _stats_outputs_not_float32(i: Instance) -> bool:
    return len([o for o in i.node.output if o]) > 1 and i.dtype is not DType.float32


def _indices_unit_strides(i: Instance) -> bool:
    return len(i.node.output) > 1 and bool(i.node.output[1]) and _unit_strides(i)


def _output_shape_without_same(i: Instance) -> bool:
    return i.attr("output_shape") is not None and i.attr("auto_pad", "NOTSET") not in ("SAME_UPPER", "SAME_LOWER")


def _recurrent_form_it_ignores(i: Instance) -> bool:
    ignored = ("clip", "activations", "activation_alpha", "activation_beta", "input_forget")
    return any(i.attr(k) for k in ignored) or i.value(4) is not None


def _fractional_float_indices(i: Instance) -> bool:
    idx = i.value(0)
    return idx is not None and idx.dtype.kind == "f" and bool(np.any(np.trunc(idx) != idx))


def _per_channel_not_2d(i: Instance) -> bool:
    scale, x = i.value(4), i.value(0)
    return scale is not None and scale.size > 1 and x is not None and x.ndim != 4


def _loop_condition_absent(i: Instance) -> bool:
    return len(i.node.input) < 2 or not i.node.input[1]


def _threshold_absent_before_another(i: Instance) -> bool:
    return len(i.node.input) > 4 and not i.node.input[3]


def _loop_stacks_rank_2_or_more(i: Instance) -> bool:
    state = i.value(2)
    return len([o for o in i.node.output if o]) > 1 and state is not None and state.ndim >= 2


def _scan_not_axis_0_forward(i: Instance) -> bool:
    moved = ("scan_input_axes", "scan_output_axes", "scan_input_directions", "scan_output_directions")
    return any(any(v != 0 for v in i.attr(k, [])) for k in moved)


def _unique_y_alone(i: Instance) -> bool:
    return len([o for o in i.node.output if o]) == 1


def _mean_ignoring_minus_one_unweighted(i: Instance) -> bool:
    target = i.value(1)
    return (
        i.attr("ignore_index") == -1
        and i.attr("reduction", "mean") == "mean"
        and i.value(2) is None
        and target is not None
        and bool((target == -1).any())
    )


def _unique_reorders_along_axis_0(i: Instance) -> bool:
    """Y put in first-occurrence order by taking along axis 0 of the input as given, which is
    right only for a 1-D input without `axis`, or for `axis` 0."""
    x, axis = i.value(0), i.attr("axis")
    assert x is not None
    return (x.ndim > 1) if axis is None else int(axis) % x.ndim != 0


def _unpool_output_shape(i: Instance) -> bool:
    return len(i.node.input) > 2 and bool(i.node.input[2])


def _one_cell_spatial_axis(i: Instance) -> bool:
    x = i.value(0)
    return x is not None and 1 in x.shape[2:]


EVALUATOR_DEFECTS: dict[Pattern, str] = {
    **{
        Pattern(op, where=_before_13): (
            "reads the opset-13 meaning (along one axis) at every version, where before 13 the op"
            " normalizes the input flattened to 2-D at its axis; onnxruntime computes the flattened"
            " form, as torch does (tests/generator/test_reference_opsets.py)"
        )
        for op in ("Softmax", "LogSoftmax", "Hardmax")
    },
    **{
        Pattern(op, where=_axes_taken_one_by_one_elsewhere): (
            "takes the axes attribute of version 11 one axis at a time in the order written (Squeeze"
            " in reverse), each counted in the rank reached so far, so a negative or unsorted list"
            " lands on other axes or fails; the spec reads them as a set, as onnxruntime and torch do"
        )
        for op in ("Squeeze", "Unsqueeze")
    },
    Pattern("BatchNormalization", where=_before_14): (
        "mixes the batch's own statistics into BatchNormalization-9's running ones (it reads the"
        " momentum attribute, always filled with its default, as training); -9 is inference only,"
        " onnxruntime normalizes with the given mean and variance, as torch does"
    ),
    Pattern("RoiAlign", where=_before_16): (
        "reads RoiAlign-10's boxes as 16's default half_pixel (shifted by half a cell); -10 has no"
        " shift, as onnxruntime and torch read it (tests/generator/test_reference_opsets.py)"
    ),
    Pattern("Resize", attrs=(("coordinate_transformation_mode", "tf_half_pixel_for_nn"),), where=_resizes): (
        "has no tf_half_pixel_for_nn, Resize-11's nearest mapping (RuntimeError); onnxruntime"
        " computes it, as torch does, and so does the hand-built form's worked-out answer"
    ),
    Pattern("OneHot", where=_fractional_float_indices): (
        "compares float indices with the classes uncast, so 0.8 matches none, where the spec casts"
        " indices to int64 first (0.8 is class 0); onnxruntime 1.32.0 casts, earlier releases do as"
        " the evaluator does; the worked-out answer sides with torch"
    ),
    Pattern("QLinearConv", where=_per_channel_not_2d): (
        "shapes a per-channel weight scale for a 2-D image ([1, M, 1, 1]) whatever the spatial rank,"
        " so a 1-D or 3-D convolution fails to broadcast (ValueError); onnxruntime with its"
        " optimizer off gives the values torch gives (tests/generator/test_ops_quant.py)"
    ),
    Pattern("Loop", where=_loop_condition_absent): (
        "reads an absent cond as false and runs no iteration (then fails stacking no scan output);"
        " the spec's for-loop form runs the trip count, as onnxruntime and torch do"
    ),
    Pattern("Loop", where=_loop_stacks_rank_2_or_more): (
        "stacks scan outputs with np.vstack, which joins elements of rank 2 or more along their"
        " first axis instead of adding one; onnx's shape inference and onnxruntime add the axis,"
        " as torch does"
    ),
    Pattern("NonMaxSuppression", where=_threshold_absent_before_another): (
        'refuses an absent iou_threshold named "" before a score_threshold (TypeError: issues with'
        " types, None among the inputs), where the spec reads it as 0; onnxruntime selects the"
        " boxes torch selects"
    ),
    Pattern("Scan", where=_scan_not_axis_0_forward): (
        "scans only along axis 0, forward (RuntimeError: not implemented); onnxruntime scans any"
        " axis either way and agrees with torch (tests/generator/test_ops_control.py)"
    ),
    Pattern("MaxPool", attrs=(("auto_pad", "SAME_LOWER"),)): (
        "sizes SAME_LOWER outputs floor(in / stride), not ceil(in / stride), and pads to that"
        " size; onnxruntime and torch give the ceil-sized result"
    ),
    Pattern("MaxPool", where=_same_upper_unit_strides): (
        "with unit strides and dilations takes its generic pooling path, which resolves SAME_UPPER"
        " pads wrongly (IndexError or shifted windows); onnxruntime agrees with torch"
    ),
    Pattern("MaxPool", where=_explicit_pads_unit_strides): (
        "ignores explicit pads when strides and dilations are 1 (windows start at the unpadded"
        " edge); onnxruntime and torch pool the padded input"
    ),
    Pattern("MaxPool", where=_integer_unpadded_unit_strides): (
        "pads integer inputs with NaN on its unit-stride path (ValueError: cannot convert float"
        " NaN to integer); onnxruntime gives the maxima torch gives"
    ),
    Pattern("MaxPool", where=_indices_unit_strides): (
        "computes the Indices output on its unit-stride path as positions inside each window, not"
        " in the flattened NxCxD1x...xDn input; onnxruntime gives the flat positions, as torch does"
    ),
    Pattern("AveragePool", where=_ceil_overhang_of_two): (
        "splits a ceil-mode overhang between the front and the back, so an overhang of two or more"
        " cells shifts every window; onnxruntime and torch put it all at the back"
    ),
    Pattern("AveragePool", where=_valid_dilation_changes_the_size): (
        "sizes VALID outputs without the dilation (floor((in - k) / s) + 1); onnxruntime and torch"
        " use the dilated kernel extent"
    ),
    Pattern("LpPool", where=_valid_dilation_changes_the_size): (
        "sizes VALID outputs without the dilation (floor((in - k) / s) + 1); onnxruntime and torch"
        " use the dilated kernel extent"
    ),
    Pattern("ConvTranspose", where=_mixed_groups): (
        "slices the grouped weights by output channel instead of input channel, writes one channel"
        " per group and adds the first group's bias to all; onnxruntime agrees with torch"
    ),
    Pattern("ConvTranspose", where=_output_shape_without_same): (
        "ignores output_shape when auto_pad is NOTSET (col2im then raises); onnxruntime derives"
        " the pads from it as the spec says, as torch does"
    ),
    Pattern("GlobalMaxPool", where=_not_rank_4): (
        "reduces axes [r-2, r) instead of [2, r), so only 4-D inputs come out right; onnxruntime"
        " reduces every spatial dim, as torch does"
    ),
    Pattern("GlobalLpPool"): "has no implementation; onnxruntime computes it and agrees with torch",
    **{
        Pattern(op, where=_recurrent_form_it_ignores): (
            "ignores sequence_lens, clip, activations with their alpha and beta, and input_forget;"
            " onnxruntime reads them (tests/generator/test_ops_recurrent.py checks every form against it)"
        )
        for op in ("RNN", "GRU", "LSTM")
    },
    Pattern("LpNormalization", attrs=(("p", "1"),)): (
        "divides by sum(x) rather than sum(|x|) for p=1; onnxruntime divides by the L1 norm, as torch does"
    ),
    Pattern("LRN", where=_batch_is_not_channels): (
        "loops over the batch dim where it means the channels (IndexError, or channels past the"
        " batch size left unnormalised); onnxruntime agrees with torch"
    ),
    Pattern("LayerNormalization", where=_stats_outputs_not_float32): (
        "returns Mean and InvStdDev in the input type, not in stash_type (float32 by default),"
        " which onnx.checker's type inference and onnxruntime both use; torch follows them"
    ),
    Pattern("Mean", where=_first_input_broadcasts): (
        "adds in place into the first input, so it fails whenever that input is the one that"
        " broadcasts; onnxruntime broadcasts every input, as torch does"
    ),
    Pattern("Softsign", where=_scalar): (
        "returns a numpy scalar, not an array, for 0-d input (x / (1 + |x|) on a 0-d array), and"
        " its own output check rejects that (TypeError); onnxruntime computes it as torch does"
    ),
    Pattern("ReduceSumSquare", dtype=DType.int32): (
        "returns int64 for int32 input (numpy's sum promotes); the schema and onnxruntime keep int32"
    ),
    Pattern("GatherElements", attrs=(("axis", "neg"),)): (
        "slices the index shape by the raw negative axis (index.shape[:axis] + index.shape[axis+1:])"
        " and so rejects valid inputs; onnxruntime normalises the axis, as torch does"
    ),
    Pattern("GatherElements", where=_narrower_indices): (
        "requires indices to match the data on the non-axis dims; the spec does not, and"
        " onnxruntime gathers them as torch does"
    ),
    Pattern("GatherElements", where=_axis_of_64_or_more): (
        "gathers with np.choose, which takes at most 63 choices: an axis of 64 or more raises;"
        " onnxruntime agrees with torch"
    ),
    Pattern("OneHot", where=_rank_1_depth): (
        "passes a 1-element rank-1 depth to np.arange, which rejects it; the spec allows it and"
        " onnxruntime reads the one element, as torch does"
    ),
    Pattern("OneHot", where=_bool_values): (
        "computes off + hot * (on - off), which numpy refuses for bool; the same node on uint8"
        " gives the one-hot torch gives"
    ),
    Pattern("Pad", where=_negative_pads): (
        "hands negative pads to np.pad, which rejects them; onnxruntime crops, as torch does"
    ),
    Pattern("Unique", attrs=(("sorted", "0"),), where=_unique_y_alone): (
        "returns numpy's sorted Y when Y is the only output, ignoring sorted=0; onnxruntime gives"
        " the first-occurrence order the spec asks for, as torch does"
    ),
    Pattern("Unique", attrs=(("sorted", "0"),), where=_unique_reorders_along_axis_0): (
        "reorders Y for sorted=0 with np.take along axis 0 of the unflattened input, so a"
        " multi-dim input without `axis`, or another axis, gets rows of the wrong slices (or an"
        " IndexError); onnxruntime gives the first-occurrence order, as torch does"
    ),
    Pattern("Resize", dtype=DType.bool): (
        "routes the data through float math numpy refuses for bool; the same nearest resize on"
        " uint8 gives what torch gives"
    ),
    Pattern("Resize", dtype=DType.float64, attrs=(("mode", "cubic"),)): (
        "computes cubic coefficients in float32 (cubic_coeff_a arrives as a numpy float32, which"
        " numpy 2 does not promote), so float64 results carry float32 rounding, ~1e-6; the"
        " spec's formula in float64 gives torch's value to the last digit"
    ),
    Pattern("Resize", attrs=(("axes", "neg"),)): (
        "transposes by the raw negative `axes` (ValueError: axes don't match array); onnxruntime"
        " normalises them, as torch does"
    ),
    Pattern("NegativeLogLikelihoodLoss", where=_mean_ignoring_minus_one_unweighted): (
        "counts targets equal to ignore_index=-1 in an unweighted mean's divisor (it skips its"
        " ignore mask for -1 alone); the spec divides by the kept targets, as onnxruntime and"
        " torch do (tests/generator/test_ops_losses.py works one out by hand)"
    ),
    **{
        Pattern("AffineGrid", dtype=dtype): (
            "returns the grid as float32 whatever theta's type; the schema's one type parameter and"
            " onnxruntime keep theta's type, as torch does (tests/generator/test_ops_sampling.py)"
        )
        for dtype in (DType.float16, DType.float64)
    },
    Pattern("GridSample", dtype=DType.float64): (
        "unnormalizes grid positions into a float32 array, so float64 results carry float32"
        " rounding (~1e-6); onnxruntime in float32 and the spec's formulas in float64 agree with torch"
    ),
    Pattern("GridSample", dtype=DType.float16): (
        "interpolates float16 inputs in float16 (its coefficients and taps are float16 arrays), off"
        " by up to ~5e-2; onnxruntime agrees with torch, and so does the evaluator on a float32 copy"
    ),
    Pattern("GridSample", attrs=(("mode", "cubic"), ("padding_mode", "border"))): (
        "clamps an out-of-bounds bicubic sampling position itself before reading its taps;"
        " onnxruntime and torch.nn.functional.grid_sample (which the spec names) clamp each tap"
        " only (tests/generator/test_ops_sampling.py works one out by hand)"
    ),
    Pattern("MaxUnpool", where=_unpool_output_shape): (
        "given output_shape, counts the indices in the smaller tensor the windows imply and pads"
        " that (an IndexError, or values in the wrong cells); MaxPool's indices, onnxruntime and"
        " torch count them in the output_shape tensor (tests/generator/test_ops_sampling.py)"
    ),
    Pattern("MaxRoiPool"): (
        "has no MaxRoiPool (RuntimeError: no registered implementation); onnxruntime, and TVM in"
        " tests/generator/test_ops_regions.py, give the maxima torch gives"
    ),
    Pattern("DeformConv", where=_one_cell_spatial_axis): (
        "normalizes sampling positions by dividing by (length - 1), which is 0 on a one-cell axis"
        " (ValueError: cannot convert float NaN to integer); onnxruntime samples it as any other"
        " axis, as torch does (tests/generator/test_ops_regions.py)"
    ),
    Pattern("DeformConv", dtype=DType.float64): (
        "samples through its GridSample, which unnormalizes positions into float32, so float64"
        " results carry float32 rounding (~1e-6); onnxruntime's float64 kernel agrees with torch"
    ),
}
"""Where onnx.reference.ReferenceEvaluator (onnx 1.23.2) is wrong, each with what the right answer
is; the torch reference still has to compute these forms, and test_known_evaluator_defect_*
shows each one still wrong on some form, with onnxruntime (or an equivalent rewrite the evaluator
gets right) siding with torch there."""


# --- the catalogue -------------------------------------------------------------------------


def _opsets(spec: type[OpSpec], dtype: DType) -> list[int]:
    """The first opset from 17 whose schema takes `dtype` (the one the other tests use) and the
    newest: the generator's opset-dependent forms (axes as inputs, scatter max/min, Pad's wrap)
    all appear by then. And at 11 and 12, the oldest opsets written, the first opset of each
    version whose attributes, inputs or outputs differ from the version at the first
    (Squeeze-11's axes attribute, Softmax-11's default axis, ArgMax-11 without
    select_last_index)."""
    ok = [
        o
        for o in range(max(OLDEST_WRITTEN, spec.since_opset), TOP_OPSET + 1)
        if spec.exists_at(o) and spec.schema_allows(o, [TType(dtype, 1)] * max(spec.arity, 1))
    ]
    late = [o for o in ok if o >= 17]
    if not late:
        return sorted({ok[0], ok[-1]}) if ok else []
    old: dict[int, int] = {}
    for o in (o for o in ok if o < min(late[0], 13)):
        old.setdefault(op_version(spec.op_type, o), o)
    changed = [o for o in old.values() if _signature(spec.op_type, o) != _signature(spec.op_type, late[0])]
    return sorted({*changed, late[0], late[-1]})


@functools.cache
def _signature(op: str, opset: int) -> tuple[object, ...]:
    """What a version's schema says a node may hold: attributes with their defaults, and the
    inputs and outputs with whether each is optional."""
    schema = onnx.defs.get_schema(op, opset, "")
    attrs = sorted((n, a.type, a.default_value.SerializeToString()) for n, a in schema.attributes.items())
    return (attrs, [[(f.name, f.option) for f in fs] for fs in (schema.inputs, schema.outputs)])


@dataclass
class PairReport:
    seeds: int = 0
    saturated: bool = False


@dataclass
class Catalogue:
    instances: list[Instance] = field(default_factory=list)
    pairs: dict[DType, PairReport] = field(default_factory=dict)


@functools.cache
def catalogue(op: str) -> Catalogue:
    """One model per form of `op`, first come first kept, over every dtype it declares."""
    spec = SPECS[op]
    cat = Catalogue()
    for dtype in classic_dtypes(spec):  # bfloat16: onnx.reference sums it in bfloat16, step by step
        report = cat.pairs.setdefault(dtype, PairReport())
        opsets = _opsets(spec, dtype)
        seen: set[Form] = set()
        last_new = 0
        # Seeds cycle through the opsets: more than two (old versions too) get more seeds.
        for seed in range(SEED_CAP_FOR.get(op, SEED_CAP) * max(len(opsets), 2) // 2 if opsets else 0):
            report.seeds += 1
            opset = opsets[seed % len(opsets)]
            cfg = GenConfig(
                wide_types=0.0,
                constant_twins=0.0,  # one node per model: the evaluator's repairs rewrite the op's first node
                nodes=1,
                ops=[op],
                dtypes=[dtype],
                opset=opset,
                feedback=False,
                max_elements=MAX_ELEMENTS,
            )
            try:
                case = generate(seed, cfg)
            except NoValidValues:
                continue
            except RuntimeError as e:
                assert "could be inserted" in str(e), str(e)
                continue
            inst = Instance(op, dtype, opset, f"seed {seed}", case.model, case.inputs)
            if inst.form not in seen:
                seen.add(inst.form)
                cat.instances.append(inst)
                last_new = seed
            elif seed - last_new >= PATIENCE:
                report.saturated = True
                break
    return cat


# --- running and comparing -----------------------------------------------------------------

RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-7}
"""Relative tolerance by dtype; the absolute one is the same times the largest magnitude
(float16 sums round at every step in numpy and once in torch)."""


def disagreement(what: str, ours: np.ndarray, theirs: np.ndarray, rtol: float | None = None) -> str | None:
    """Why `ours` is not `theirs` (None when it is): dtype and shape exactly, integers and bools
    exactly, floats within tolerance, NaN where they have NaN and infinities alike."""
    if ours.dtype != theirs.dtype or ours.shape != theirs.shape:
        return f"{what}: {ours.dtype}{list(ours.shape)} vs {theirs.dtype}{list(theirs.shape)}"
    if ours.dtype.kind == "f":
        a, b = ours.astype(np.float64), theirs.astype(np.float64)
        tol = RTOL[ours.dtype] if rtol is None else rtol
        finite = np.abs(b[np.isfinite(b)])
        atol = tol * max(1.0, float(finite.max()) if finite.size else 1.0)
        with np.errstate(invalid="ignore"):
            close = (a == b) | (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= atol + tol * np.abs(b))
        bad = ~close
    else:
        a, b, bad = ours, theirs, ours != theirs
    if not bad.any():
        return None
    at = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"{what}: {int(bad.sum())}/{bad.size} elements differ, first at {at}: {a[at]!r} vs {b[at]!r}"


ONLY_LATER = re.compile(r"No implementation for operator '(\w+)' domain '' and version \d+, found (\d+)")
"""onnx.reference implements QuantizeLinear and DequantizeLinear only from opset 19; the forms
the generator writes (float32 <-> uint8/int8, per-tensor from 10, per-axis from 13, where -10
has no axis) mean the same since."""
SAME_SINCE = {"QuantizeLinear": 10, "DequantizeLinear": 10}


def _evaluate(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, dict(inputs))]
        except RuntimeError as e:
            later = ONLY_LATER.search(str(e))
            if later is None or later.group(1) not in SAME_SINCE or _opset(model) < SAME_SINCE[later.group(1)]:
                raise
            newer = onnx.ModelProto()
            newer.CopyFrom(model)
            next(o for o in newer.opset_import if o.domain in ("", "ai.onnx")).version = int(later.group(2))
            return [np.asarray(v) for v in ReferenceEvaluator(newer).run(None, dict(inputs))]


def _opset(model: onnx.ModelProto) -> int:
    return int(next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")))


def _torch(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = run_reference(model, dict(inputs))
    return [ours[o.name] for o in model.graph.output]


@dataclass
class Outcome:
    instance: Instance
    torch_error: str | None = None
    evaluator_error: str | None = None
    disagreement: str | None = None
    """How the torch reference and the evaluator differ, when both ran."""
    wrong_answer: str | None = None
    """How the torch reference differs from a hand-built form's worked-out answer."""
    ours: list[np.ndarray] = field(default_factory=list)

    @property
    def evaluator_wrong(self) -> bool:
        return self.torch_error is None and (self.evaluator_error is not None or self.disagreement is not None)

    def problem(self) -> str | None:
        """What is wrong with the torch reference on this form (or unexplained about the evaluator)."""
        where = f"{describe(self.instance.form)} ({self.instance.origin}, opset {self.instance.opset})"
        if self.torch_error is not None:
            return f"{where}: the torch reference cannot compute it: {self.torch_error}"
        if self.wrong_answer is not None:
            return f"{where}: the torch reference is wrong: {self.wrong_answer}"
        if self.instance.defects:
            return None
        if self.evaluator_error is not None:
            return f"{where}: the evaluator fails ({self.evaluator_error}); if that is its fault, list it"
        if self.disagreement is not None:
            return f"{where}: {self.disagreement}"
        return None


def check(inst: Instance) -> Outcome:
    out = Outcome(inst)
    names = [o.name for o in inst.model.graph.output]
    try:
        out.ours = _torch(inst.model, inst.inputs)
    except Exception as e:  # noqa: BLE001 - any failure of the oracle is the finding
        out.torch_error = f"{type(e).__name__}: {e}"
    try:
        theirs = _evaluate(inst.model, inst.inputs)
    except Exception as e:  # noqa: BLE001 - the evaluator raises whatever numpy raises
        out.evaluator_error = f"{type(e).__name__}: {str(e)[:200]}"
        theirs = []
    if out.ours and theirs:
        found = (disagreement(n, a, b) for n, a, b in zip(names, out.ours, theirs, strict=True))
        out.disagreement = next((d for d in found if d), None)
    if out.ours and inst.expected is not None:
        found = (disagreement(n, a, inst.expected[n]) for n, a in zip(names, out.ours, strict=True))
        out.wrong_answer = next((d for d in found if d), None)
    return out


@functools.cache
def outcomes(op: str) -> list[Outcome]:
    return [check(inst) for inst in catalogue(op).instances]


# --- hand-built forms ----------------------------------------------------------------------


def _hand(
    name: str,
    op: str,
    key_dtype: DType,
    feeds: Mapping[str, np.ndarray],
    consts: Mapping[str, np.ndarray],
    node_inputs: Sequence[str],
    outputs: Sequence[str],
    opset: int = 18,
    expected: Mapping[str, np.ndarray] | None = None,
    **attrs: Any,
) -> Instance:
    """A valid single-node model: graph inputs `feeds`, op-owned initializers `consts` (named c*,
    as the generator names them), output types and shapes from ONNX's own inference."""
    node = helper.make_node(op, list(node_inputs), list(outputs), **attrs)
    graph = helper.make_graph(
        [node],
        name.replace(" ", "_"),
        [helper.make_tensor_value_info(k, DType.from_numpy(v.dtype).onnx, list(v.shape)) for k, v in feeds.items()],
        [helper.make_value_info(o, onnx.TypeProto()) for o in outputs if o],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION.get(opset, 8)
    )
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for out in model.graph.output:  # ONNX infers no shape for a 0-d GatherND; the answer has it
        if not out.type.tensor_type.HasField("shape") and expected is not None:
            out.type.tensor_type.shape.SetInParent()
            out.type.tensor_type.shape.dim.extend(
                [onnx.TensorShapeProto.Dimension(dim_value=d) for d in np.shape(expected[out.name])]
            )
    onnx.checker.check_model(model, full_check=True)
    answer = {k: np.asarray(v) for k, v in expected.items()} if expected is not None else None
    return Instance(op, key_dtype, opset, name, model, dict(feeds), answer)


def _data(shape: Sequence[int], dtype: DType, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype is DType.bool:
        return rng.random(shape) < 0.5
    if dtype.is_float:
        return rng.uniform(-1, 1, shape).astype(dtype.numpy)
    return rng.integers(0 if dtype is DType.uint8 else -8, 9, shape).astype(dtype.numpy)


def _i64(*values: int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _layer_norm(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(standardised, mean, 1 / std) over the dims from `axis`, in float64."""
    xd = x.astype(np.float64)
    dims = tuple(range(axis % x.ndim, x.ndim))
    mean = xd.mean(axis=dims, keepdims=True)
    inv = 1 / np.sqrt(((xd - mean) ** 2).mean(axis=dims, keepdims=True) + 1e-5)
    return (xd - mean) * inv, mean, inv


def _hand_layer_norm() -> list[Instance]:
    found = []
    for dtype, axis, outs in (
        (DType.float32, 1, ["y", "mean", "inv"]),
        (DType.float16, -1, ["y", "mean", "inv"]),
        (DType.float64, 0, ["y", "", "inv"]),
        (DType.float32, -2, ["y", "mean"]),
    ):
        x = _data([2, 3, 4], dtype)
        scale = _data(x.shape[axis % 3 :], dtype, 1)
        y, mean, inv = _layer_norm(x, axis)
        expected = {
            "y": (y * scale).astype(dtype.numpy),
            "mean": mean.astype(np.float32),
            "inv": inv.astype(np.float32),
        }
        found.append(
            _hand(
                f"LayerNormalization {dtype} axis {axis} outputs {'+'.join(o or '-' for o in outs)}",
                "LayerNormalization",
                dtype,
                {"x": x},
                {"c0": scale},
                ["x", "c0"],
                outs,
                opset=17,
                expected={o: expected[o] for o in outs if o},
                axis=axis,
            )
        )
    return found


def _one_hot_rows() -> np.ndarray:
    """0.8 -> 0, 2.7 -> 2, -0.5 -> 0, -1.5 -> -1 (class 2 of 3), 3.2 -> 3 (out of range: all off)."""
    rows = np.zeros((5, 3), np.float32)
    rows[[0, 1, 2, 3], [0, 2, 0, 2]] = 1.0
    return rows


def _hand_indexing() -> list[Instance]:
    x1, x3 = _data([5], DType.float32), _data([2, 3, 4], DType.int8)
    fractions = np.asarray([0.8, 2.7, -0.5, -1.5, 3.2], np.float32)
    return [
        _hand(
            "OneHot of fractional float indices, cast to int64 first",
            "OneHot",
            DType.float32,
            {"x": fractions},
            {"c0": np.asarray(3, np.int64), "c1": np.asarray([0.0, 1.0], np.float32)},
            ["x", "c0", "c1"],
            ["y"],
            expected={"y": _one_hot_rows()},
        ),
        _hand(
            "Gather scalar index into 1-D data",
            "Gather",
            DType.float32,
            {"x": x1},
            {"c0": np.asarray(-2, np.int64)},
            ["x", "c0"],
            ["y"],
            expected={"y": x1[-2]},
        ),
        _hand(
            "Gather scalar int32 index on axis 1",
            "Gather",
            DType.int8,
            {"x": x3},
            {"c0": np.asarray(2, np.int32)},
            ["x", "c0"],
            ["y"],
            expected={"y": x3[:, 2]},
            axis=1,
        ),
        _hand(
            "GatherND down to a scalar",
            "GatherND",
            DType.float32,
            {"x": x3.astype(np.float32)},
            {"c0": _i64(1, -1, 2)},
            ["x", "c0"],
            ["y"],
            expected={"y": x3.astype(np.float32)[1, -1, 2]},
        ),
        _hand(
            "Tile of a scalar",
            "Tile",
            DType.int64,
            {"x": np.asarray(7, np.int64)},
            {"c0": np.zeros([0], np.int64)},
            ["x", "c0"],
            ["y"],
            expected={"y": np.asarray(7, np.int64)},
        ),
        _hand(
            "Squeeze down to a scalar",
            "Squeeze",
            DType.float32,
            {"x": x1[:1]},
            {"c0": _i64(0)},
            ["x", "c0"],
            ["y"],
            expected={"y": x1[0]},
        ),
        _hand(
            "Unsqueeze of a scalar",
            "Unsqueeze",
            DType.bool,
            {"x": np.asarray(True)},
            {"c0": _i64(-1, 0)},
            ["x", "c0"],
            ["y"],
            expected={"y": np.ones([1, 1], bool)},
        ),
        _hand(
            "Expand of a scalar",
            "Expand",
            DType.uint8,
            {"x": np.asarray(3, np.uint8)},
            {"c0": _i64(2, 3)},
            ["x", "c0"],
            ["y"],
            expected={"y": np.full([2, 3], 3, np.uint8)},
        ),
        _hand(
            "Reshape of a scalar",
            "Reshape",
            DType.float16,
            {"x": np.asarray(0.5, np.float16)},
            {"c0": _i64(1, -1)},
            ["x", "c0"],
            ["y"],
            expected={"y": np.full([1, 1], 0.5, np.float16)},
        ),
        _hand(
            "EyeLike with another dtype",
            "EyeLike",
            DType.float32,
            {"x": _data([3, 4], DType.float32)},
            {},
            ["x"],
            ["y"],
            expected={"y": np.eye(3, 4, k=1, dtype=np.int64)},
            k=1,
            dtype=TensorProto.INT64,
        ),
        _hand(
            "Einsum with an ellipsis",
            "Einsum",
            DType.float32,
            {"a": _data([2, 3, 4], DType.float32), "b": _data([4, 5], DType.float32, 1)},
            {},
            ["a", "b"],
            ["y"],
            equation="...ij,jk->...ik",
        ),
        _hand(
            "Einsum of three inputs",
            "Einsum",
            DType.int32,
            {"a": _data([2, 3], DType.int32), "b": _data([3, 4], DType.int32, 1), "c": _data([4], DType.int32, 2)},
            {},
            ["a", "b", "c"],
            ["y"],
            equation="ij,jk,k->i",
        ),
    ]


def _hand_optional_outputs() -> list[Instance]:
    x = _data([2, 3, 5, 6], DType.float32)
    xi = _data([1, 2, 6], DType.int8)
    x3 = _data([1, 2, 4, 5, 3], DType.float32, 2)
    c = 3
    bn = {f"c{k}": _data([c], DType.float32, k) for k in range(3)}
    bn["c3"] = np.abs(_data([c], DType.float32, 3)) + 0.5
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    norm = (x - mean.reshape(1, -1, 1, 1)) / np.sqrt(var.reshape(1, -1, 1, 1) + 1e-5)
    bn_y = norm * bn["c0"].reshape(1, -1, 1, 1) + bn["c1"].reshape(1, -1, 1, 1)
    return [
        _hand(
            "Dropout with its mask",
            "Dropout",
            DType.float32,
            {"x": x},
            {},
            ["x"],
            ["y", "mask"],
            expected={"y": x, "mask": np.ones(x.shape, bool)},
        ),
        _hand(
            "Dropout, ratio and training_mode off, with its mask",
            "Dropout",
            DType.float16,
            {"x": x.astype(np.float16)},
            {"c0": np.asarray(0.3, np.float16), "c1": np.asarray(False)},
            ["x", "c0", "c1"],
            ["y", "mask"],
            expected={"y": x.astype(np.float16), "mask": np.ones(x.shape, bool)},
        ),
        _hand(
            "MaxPool with Indices, strided and padded",
            "MaxPool",
            DType.float32,
            {"x": x},
            {},
            ["x"],
            ["y", "idx"],
            kernel_shape=[2, 3],
            strides=[2, 2],
            pads=[1, 0, 0, 1],
        ),
        _hand(
            "MaxPool with Indices in column-major order, 3-D, dilated",
            "MaxPool",
            DType.float32,
            {"x": x3},
            {},
            ["x"],
            ["y", "idx"],
            kernel_shape=[2, 2, 2],
            dilations=[1, 2, 1],
            strides=[1, 1, 2],
            storage_order=1,
        ),
        _hand(
            "MaxPool with Indices, unit strides",
            "MaxPool",
            DType.float32,
            {"x": x},
            {},
            ["x"],
            ["y", "idx"],
            kernel_shape=[2, 2],
        ),
        _hand(
            "MaxPool with Indices on int8 ties",
            "MaxPool",
            DType.int8,
            {"x": xi},
            {},
            ["x"],
            ["y", "idx"],
            kernel_shape=[3],
            strides=[2],
        ),
        _hand(
            "BatchNormalization training mode with running statistics",
            "BatchNormalization",
            DType.float32,
            {"x": x},
            bn,
            ["x", "c0", "c1", "c2", "c3"],
            ["y", "running_mean", "running_var"],
            expected={
                "y": bn_y.astype(np.float32),
                "running_mean": (bn["c2"] * 0.8 + mean * 0.2).astype(np.float32),
                "running_var": (bn["c3"] * 0.8 + var * 0.2).astype(np.float32),
            },
            training_mode=1,
            momentum=0.8,
        ),
    ]


def _hand_conv_transpose() -> list[Instance]:
    x, w = _data([1, 2, 5, 4], DType.float32), _data([2, 3, 3, 2], DType.float32, 1)
    forms: list[tuple[str, dict[str, Any]]] = [
        ("auto_pad SAME_UPPER", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ("auto_pad SAME_LOWER", {"auto_pad": "SAME_LOWER", "strides": [2, 1]}),
        ("auto_pad VALID", {"auto_pad": "VALID", "strides": [2, 1]}),
        ("output_shape", {"output_shape": [10, 5], "strides": [2, 2]}),
        ("output_shape under SAME_UPPER", {"output_shape": [9, 4], "strides": [2, 1], "auto_pad": "SAME_UPPER"}),
    ]
    return [
        _hand(f"ConvTranspose {name}", "ConvTranspose", DType.float32, {"x": x}, {"w0": w}, ["x", "w0"], ["y"], **attrs)
        for name, attrs in forms
    ]


def _hand_windows() -> list[Instance]:
    """Window forms the generator emits too rarely for the catalogue to keep one."""
    x = _data([1, 2, 7, 8], DType.float32)
    w = _data([4, 2, 3, 2], DType.float32, 1)
    return [
        _hand(
            "AveragePool ceil_mode with an overhang of two",
            "AveragePool",
            DType.float32,
            {"x": x},
            {},
            ["x"],
            ["y"],
            kernel_shape=[3, 2],
            strides=[3, 3],
            ceil_mode=1,
        ),
        _hand(
            "AveragePool VALID with dilations",
            "AveragePool",
            DType.float32,
            {"x": x},
            {},
            ["x"],
            ["y"],
            opset=19,
            kernel_shape=[3, 2],
            dilations=[2, 2],
            auto_pad="VALID",
        ),
        _hand(
            "ConvTranspose in 2 groups of 2 channels, with bias",
            "ConvTranspose",
            DType.float32,
            {"x": _data([1, 4, 3, 4], DType.float32)},
            {"w0": w, "w1": _data([4], DType.float32, 2)},
            ["x", "w0", "w1"],
            ["y"],
            group=2,
            strides=[2, 1],
        ),
    ]


def _hand_empty_axes() -> list[Instance]:
    x = _data([2, 3, 4], DType.float32)
    found = []
    for op, noop in (("ReduceSum", 0), ("ReduceMax", 1), ("ReduceL1", 1), ("ReduceMean", 0)):
        found.append(
            _hand(
                f"{op} with an empty axes input, noop_with_empty_axes={noop}",
                op,
                DType.float32,
                {"x": x},
                {"c0": np.zeros([0], np.int64)},
                ["x", "c0"],
                ["y"],
                noop_with_empty_axes=noop,
                keepdims=0,
            )
        )
    return found


def _hand_scalar_results() -> list[Instance]:
    """Reductions of everything without kept dims, and Arg* of a vector: 0-d results, which the
    generator avoids and a reduced model may well hold."""
    x = _data([3, 4], DType.float32)
    found = []
    for op, spec in SPECS.items():
        if spec.__module__ != "generator.ops.reduce" or op == "TopK":
            continue
        if op.startswith("Arg"):
            found.append(_hand(f"{op} of a vector", op, DType.float32, {"x": x[0]}, {}, ["x"], ["y"], keepdims=0))
        else:
            found.append(
                _hand(f"{op} of everything to a scalar", op, DType.float32, {"x": x}, {}, ["x"], ["y"], keepdims=0)
            )
    return found


def _hand_resize() -> list[Instance]:
    x = _data([1, 1, 4, 5], DType.float32)
    return [
        _hand(
            "Resize with an empty roi and scales",
            "Resize",
            DType.float32,
            {"x": x},
            {"c0": np.zeros([0], np.float32), "c1": np.asarray([1, 1, 2, 0.5], np.float32)},
            ["x", "c0", "c1"],
            ["y"],
            mode="linear",
        ),
        _hand(
            "Resize-11 tf_half_pixel_for_nn, nearest, upscaled",
            "Resize",
            DType.float32,
            {"x": np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)},
            {"c0": np.zeros([0], np.float32), "c1": np.asarray([1, 1, 2, 2], np.float32)},
            ["x", "c0", "c1"],
            ["y"],
            opset=11,
            # Output position y reads (y + 0.5) / 2, rounded half down: rows 0 1 1 2 2 2, columns
            # 0 1 1 2 2 3 3 3 (the last ones clamped).
            expected={
                "y": np.arange(12, dtype=np.float32).reshape(3, 4)[[0, 1, 1, 2, 2, 2]][:, [0, 1, 1, 2, 2, 3, 3, 3]][
                    None, None
                ]
            },
            mode="nearest",
            coordinate_transformation_mode="tf_half_pixel_for_nn",
        ),
        _hand(
            "Resize tf_crop_and_resize, linear, by sizes, extrapolated",
            "Resize",
            DType.float32,
            {"x": x},
            {"c0": np.asarray([0, 0, -0.2, 0.1, 1, 1, 0.9, 1.3], np.float32), "c1": _i64(1, 1, 3, 6)},
            ["x", "c0", "", "c1"],
            ["y"],
            mode="linear",
            coordinate_transformation_mode="tf_crop_and_resize",
            extrapolation_value=-5.0,
        ),
        _hand(
            "Resize tf_crop_and_resize, nearest, by scales on two axes",
            "Resize",
            DType.int32,
            {"x": _data([1, 1, 4, 4], DType.int32)},
            {"c0": np.asarray([0.25, -0.5, 0.75, 0.8], np.float32), "c1": np.asarray([2, 1.5], np.float32)},
            ["x", "c0", "c1"],
            ["y"],
            mode="nearest",
            coordinate_transformation_mode="tf_crop_and_resize",
            axes=[2, 3],
        ),
        _hand(
            "Resize antialias, linear downscale",
            "Resize",
            DType.float32,
            {"x": _data([1, 2, 9, 10], DType.float32)},
            {"c0": np.asarray([1, 1, 0.5, 0.3], np.float32)},
            ["x", "", "c0"],
            ["y"],
            mode="linear",
            antialias=1,
        ),
        _hand(
            "Resize antialias, cubic down and up, exclude_outside",
            "Resize",
            DType.float32,
            {"x": _data([1, 2, 9, 10], DType.float32)},
            {"c0": _i64(4, 13)},
            ["x", "", "", "c0"],
            ["y"],
            mode="cubic",
            antialias=1,
            exclude_outside=1,
            axes=[2, 3],
        ),
        _hand(
            "Resize keep_aspect_ratio_policy not_larger",
            "Resize",
            DType.float32,
            {"x": x},
            {"c0": _i64(7, 7)},
            ["x", "", "", "c0"],
            ["y"],
            mode="linear",
            keep_aspect_ratio_policy="not_larger",
            axes=[2, 3],
        ),
        _hand(
            "Resize keep_aspect_ratio_policy not_smaller",
            "Resize",
            DType.uint8,
            {"x": _data([1, 1, 4, 5], DType.uint8)},
            {"c0": _i64(7, 7)},
            ["x", "", "", "c0"],
            ["y"],
            mode="nearest",
            keep_aspect_ratio_policy="not_smaller",
            axes=[2, 3],
        ),
        _hand(
            "Resize with empty scales and sizes (opset 13)",
            "Resize",
            DType.float32,
            {"x": x},
            {"c0": np.zeros([0], np.float32), "c1": np.zeros([0], np.float32), "c2": _i64(1, 1, 6, 3)},
            ["x", "c0", "c1", "c2"],
            ["y"],
            opset=13,
            mode="nearest",
        ),
    ]


ELEMENTWISE = ("generator.ops.elementwise", "generator.ops.unary", "generator.ops.clip_cast")
SCALAR_OPS = [op for op, spec in SPECS.items() if spec.__module__ in ELEMENTWISE or op == "Identity"]
"""Ops checked on 0-d data as well: the generator never makes a 0-d tensor but Size does, and a
reduced model can feed it anywhere."""


@functools.cache
def scalar_form(op: str) -> Instance:
    """The op's first generated form with every data input cut down to 0-d (op-owned constants
    kept as written)."""
    spec = SPECS[op]
    template = next(i for i in catalogue(op).instances if i.dtype is spec.dtypes[0])
    node = template.node
    owned = {i.name for i in template.model.graph.initializer if i.name.startswith("c")}
    feeds = {n: template.values[n].reshape(-1)[:1].reshape(()) for n in node.input if n and n not in owned}
    consts = {n: template.values[n] for n in node.input if n in owned}
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    name = f"{op} of scalars"
    return _hand(name, op, template.dtype, feeds, consts, list(node.input), list(node.output), template.opset, **attrs)


def _hand_unique() -> list[Instance]:
    """Unique in first-occurrence order, worked out by hand: Y alone, and every output of a
    2-D input without `axis` (flattened) and with axis 1 (columns)."""
    x1 = _i64(3, 1, 3, 0, 1)
    x2 = np.asarray([[2, 0], [2, 5], [0, 0]], np.int64)
    cols = np.asarray([[1, 0, 1, 2], [4, 4, 4, 0]], np.int64)
    outs = ["y", "indices", "inverse", "counts"]
    return [
        _hand(
            "Unique sorted=0 with Y alone",
            "Unique",
            DType.int64,
            {"x": x1},
            {},
            ["x"],
            ["y"],
            expected={"y": _i64(3, 1, 0)},
            sorted=0,
        ),
        _hand(
            "Unique sorted=0 of a 2-D input without axis, every output",
            "Unique",
            DType.int64,
            {"x": x2},
            {},
            ["x"],
            outs,
            expected={
                "y": _i64(2, 0, 5),
                "indices": _i64(0, 1, 3),
                "inverse": _i64(0, 1, 0, 2, 1, 1),
                "counts": _i64(2, 3, 1),
            },
            sorted=0,
        ),
        _hand(
            "Unique sorted=0 of columns (axis 1), every output",
            "Unique",
            DType.int64,
            {"x": cols},
            {},
            ["x"],
            outs,
            expected={
                "y": np.asarray([[1, 0, 2], [4, 4, 0]], np.int64),
                "indices": _i64(0, 1, 3),
                "inverse": _i64(0, 1, 0, 2),
                "counts": _i64(2, 1, 1),
            },
            sorted=0,
            axis=1,
        ),
    ]


def _hand_gaps() -> list[Instance]:
    x = _data([2, 6], DType.float32)
    return [
        _hand(
            "Split into equal parts counted by its outputs (opset 13)",
            "Split",
            DType.float32,
            {"x": x},
            {},
            ["x"],
            ["a", "b", "c"],
            opset=13,
            expected={"a": x[:, :2], "b": x[:, 2:4], "c": x[:, 4:]},
            axis=1,
        )
    ]


KNOWN_TORCH_GAPS: dict[str, str] = {}
"""Hand-built forms the torch reference cannot compute as things stand, with why: each must
still fail (strict xfail), so a fix shows; they are left out of the counts and the defect checks."""


@functools.cache
def hand_built() -> dict[str, Instance]:
    groups: list[Callable[[], list[Instance]]] = [
        _hand_layer_norm,
        _hand_indexing,
        _hand_optional_outputs,
        _hand_conv_transpose,
        _hand_windows,
        _hand_empty_axes,
        _hand_scalar_results,
        _hand_resize,
        _hand_gaps,
        _hand_unique,
    ]
    return {i.origin: i for group in groups for i in group()}


@functools.cache
def hand_outcome(name: str) -> Outcome:
    return check(hand_built()[name])


@functools.cache
def scalar_outcome(op: str) -> Outcome:
    return check(scalar_form(op))


def every_outcome(op: str) -> list[Outcome]:
    """Generated, hand-built and 0-d forms of `op`."""
    found = list(outcomes(op))
    found += [hand_outcome(n) for n, inst in hand_built().items() if inst.op == op and n not in KNOWN_TORCH_GAPS]
    return found + ([scalar_outcome(op)] if op in SCALAR_OPS else [])


# --- the tests -----------------------------------------------------------------------------


def _report(found: Sequence[Outcome]) -> str:
    return "\n".join(p for p in (o.problem() for o in found) if p)


@pytest.mark.parametrize("op", list(SPECS))
def test_torch_reference_matches_the_evaluator_on_every_generated_form(op: str) -> None:
    found = outcomes(op)
    assert {o.instance.dtype for o in found} == set(classic_dtypes(SPECS[op])), f"{op}: some dtype has no form"
    problems = _report(found)
    assert not problems, f"{op}: {problems.count(chr(10)) + 1} of {len(found)} forms:\n{problems}"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_TORCH_GAPS[n]))
        if n in KNOWN_TORCH_GAPS
        else n
        for n in hand_built()
    ],
)
def test_hand_built_form(name: str) -> None:
    """Forms the generator does not emit (optional outputs, 0-d indices and results, attribute
    spellings of user models): the torch reference computes them, and right."""
    problem = hand_outcome(name).problem()
    assert problem is None, problem


@pytest.mark.parametrize("op", SCALAR_OPS)
def test_scalar_form(op: str) -> None:
    """0-d operands take other paths in both interpreters (numpy turns 0-d results into scalars,
    torch's sizes come out empty)."""
    outcome = scalar_outcome(op)
    assert all(a.ndim == 0 for a in outcome.instance.inputs.values())
    problem = outcome.problem()
    assert problem is None, problem


def _onnxruntime(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray] | None:
    """onnxruntime's outputs, or None where it cannot run the model (a missing kernel, often)."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        return [np.asarray(v) for v in session.run(None, dict(inputs))]
    except Exception:  # noqa: BLE001 - onnxruntime raises its own untyped exceptions
        return None


def _retyped(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], old: int, new: int
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model with every `old`-typed tensor made `new`-typed, values converted."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for v in [*m.graph.input, *m.graph.output, *m.graph.value_info]:
        if v.type.tensor_type.elem_type == old:
            v.type.tensor_type.elem_type = new
    to = DType.from_onnx(new).numpy
    for k, init in enumerate(m.graph.initializer):
        if init.data_type == old:
            m.graph.initializer[k].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(to), init.name))
    for node in m.graph.node:
        for a in node.attribute:
            if a.name in ("to", "dtype") and a.i == old:
                a.i = new
    return m, {k: v.astype(to) if v.dtype == DType.from_onnx(old).numpy else v for k, v in inputs.items()}


def confirmations(o: Outcome) -> list[str]:
    """Independent computations that agree with the torch reference on this form: onnxruntime
    (on a float32 copy where it lacks the float64 kernel), the evaluator on a uint8 copy of a
    bool model (a lossless stand-in for ops that only move values), a worked-out answer."""
    inst, names = o.instance, [v.name for v in o.instance.model.graph.output]
    if o.torch_error is not None:
        return []

    def agree(theirs: list[np.ndarray] | None, rtol: float | None = None) -> bool:
        if theirs is None or len(theirs) != len(names):
            return False
        pairs = zip(names, o.ours, theirs, strict=True)
        return all(disagreement(n, a, b.astype(a.dtype), rtol) is None for n, a, b in pairs)

    found = ["its worked-out answer"] if inst.expected is not None and o.wrong_answer is None else []
    if agree(_onnxruntime(inst.model, inst.inputs)):
        found.append("onnxruntime")
    elif inst.dtype is DType.float64 and agree(
        _onnxruntime(*_retyped(inst.model, inst.inputs, TensorProto.DOUBLE, TensorProto.FLOAT)), 1e-4
    ):
        found.append("onnxruntime in float32")
    if any(a.dtype == np.bool_ for a in [*inst.values.values(), *o.ours]):
        model, feeds = _retyped(inst.model, inst.inputs, TensorProto.BOOL, TensorProto.UINT8)
        try:
            proxy = _evaluate(model, feeds)
        except Exception:  # noqa: BLE001 - the evaluator raises whatever numpy raises
            proxy = []
        if agree([p.astype(np.bool_) if a.dtype == np.bool_ else p for p, a in zip(proxy, o.ours, strict=False)]):
            found.append("the evaluator on a uint8 copy")
    return found


@pytest.mark.parametrize("pattern", list(EVALUATOR_DEFECTS), ids=str)
def test_known_evaluator_defect_still_shows_and_torch_is_confirmed(pattern: Pattern) -> None:
    """A listed defect covers at least one form on which the evaluator alone is wrong (no other
    listed defect applies) and something independent agrees with the torch reference; a pattern
    that matches nothing, or whose forms the evaluator now gets right, has gone stale."""
    matched = [o for o in every_outcome(pattern.op) if pattern in o.instance.defects]
    assert matched, f"{pattern}: no generated or hand-built form matches it"
    wrong = [o for o in matched if o.evaluator_wrong and o.instance.defects == [pattern]]
    assert wrong, f"{pattern}: the evaluator agrees with torch on all {len(matched)} forms it covers alone"
    confirmed = next((o for o in wrong if confirmations(o)), None)
    assert confirmed is not None, (
        f"{pattern}: nothing independent agrees with torch on any of {len(wrong)} forms, e.g. "
        f"{describe(wrong[0].instance.form)}: {wrong[0].evaluator_error or wrong[0].disagreement}"
    )


def test_every_op_and_dtype_is_covered_and_the_counts() -> None:
    """The whole catalogue, counted (shown with `pytest -s`): every registered op and declared dtype
    has forms, and every form is either compared or skipped as a known evaluator defect."""
    everything = [o for op in SPECS for o in every_outcome(op)]
    assert {(o.instance.op, o.instance.dtype) for o in everything} >= {
        (op, d) for op, spec in SPECS.items() for d in classic_dtypes(spec)
    }
    skipped = [o for o in everything if o.instance.defects]
    compared = [o for o in everything if not o.instance.defects]
    assert len(skipped) + len(compared) == len(everything) and compared
    assert all(o.torch_error is None for o in everything)
    pairs = [(op, r) for op in SPECS for r in catalogue(op).pairs.values()]
    generated = sum(len(catalogue(op).instances) for op in SPECS)
    by_defect = {str(p): sum(p in o.instance.defects for o in skipped) for p in EVALUATOR_DEFECTS}
    print(
        f"\ntorch reference parity: {len(SPECS)} op types, {len({o.instance.dtype for o in everything})} dtypes,"
        f" {len(everything)} forms ({generated} generated from {sum(r.seeds for _, r in pairs)} seeds,"
        f" {len(hand_built()) - len(KNOWN_TORCH_GAPS)} hand-built, {len(SCALAR_OPS)} 0-d);"
        f" {len(compared)} compared with the evaluator,"
        f" {len(skipped)} skipped as known onnx.reference defects ({len(EVALUATOR_DEFECTS)} patterns);"
        f" {sum(r.saturated for _, r in pairs)}/{len(pairs)} op x dtype pairs saturated"
    )
    for name, count in by_defect.items():
        print(f"  {count:4d} forms skipped: {name}")
    print(f"  known torch reference gaps (strict xfail): {len(KNOWN_TORCH_GAPS)}")
