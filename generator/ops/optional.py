"""Optional inputs drawn absent and present: the inputs' twin of generator.emit.ExplicitDefaults.

A converter branches on an optional input's absence as it branches on an attribute's: TVM's
QuantizeLinear-21 reads its zero point only `if len(inputs) > 2`, so a mutant that reads it
unconditionally crashes only on a QuantizeLinear without one, and a generator that always
writes the zero point never kills it. So every optional input whose absence the ONNX spec
defines is drawn both ways, for every op written.

`OPTIONAL` is the audit, as data: every optional input of every op a spec writes (at any
opset from 11), with what its absence means and who draws its two forms. Most specs draw
both themselves (a Conv's bias, an RNN's initial state, Clip's bounds, Slice's axes and
steps: `Slot.spec` names how). The rest are drawn here, at emission, in one place
(`OptionalInputs`, called from `OnnxEmitter.node`), steered by coverage toward the form not
seen yet (generator.coverage counts `Op.input<k>=absent` and `=present`):

- `drop`: an input a spec always writes is left out a share of the time, where leaving it
  out means a value the spec could have drawn (a zero point of 0, an IoU threshold of 0 over
  boxes that overlap heavily or not at all), trailing ones dropped and inner ones named "";
- `make`: an input a spec always leaves out is written a share of the time at the value its
  absence means (an empty roi, a constant_value of 0, a full nonpad_kv_seqlen).

The node written is the node the reference computes, so a drop in the op's own node may
change values (a zero point of 0 instead of 130): the model stays valid, its output shape
and type unchanged. In a template's node (or another spec's helper node) only an input that
holds what its absence means is dropped, so that a template keeps the semantics its variant
is about.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from onnx import TensorProto, helper

from generator.binning import ABSENT, PRESENT, BinWeight
from generator.dtypes import DType
from generator.ops.base import Attrs, has_attribute, may_omit, schema_at

OPTIONAL_SHARE = 1 / 3
"""The share of droppable inputs left out, and of makeable absent ones written at what their
absence means (before coverage feedback weighs the two forms)."""


class Known(Protocol):
    """What the emitter knows of the node being written."""

    def array(self, name: str) -> np.ndarray | None:
        """The value of `name` where the node's own writing made it (a constant, a weight, a
        runtime input); None for a graph tensor, which no drop may take from its consumer."""

    def typed(self, name: str) -> tuple[list[int], DType] | None:
        """The shape and type of `name`, where known."""


@dataclass(frozen=True)
class NodeView:
    """A node about to be written, as a drop or make rule reads it."""

    op_type: str
    opset: int
    inputs: Sequence[str]
    outputs: int
    attrs: Attrs
    own: bool
    """Written by the op's own spec (not a template or another spec's helper node)."""
    known: Known

    def given(self, slot: int) -> str:
        """Input `slot`'s name, "" where absent."""
        return self.inputs[slot] if slot < len(self.inputs) else ""

    def array(self, slot: int) -> np.ndarray | None:
        name = self.given(slot)
        return self.known.array(name) if name else None


Drop = Callable[[NodeView, int], Attrs | None]
"""The node's attributes once input `slot` is left out, or None where it may not be."""
Make = Callable[[NodeView, int], tuple[np.ndarray, Attrs] | None]
"""The value input `slot` takes, present at what its absence means, with the node's
attributes; None where the node cannot take it."""


@dataclass(frozen=True)
class Slot:
    """One optional input of one op: what its absence means and who draws its two forms."""

    name: str
    absent: str
    """What the spec says its absence means."""
    spec: str = ""
    """How the op's spec draws both forms itself, where it does."""
    drop: Drop | None = None
    make: Make | None = None
    never: str = ""
    """Why neither form is added, where the spec draws one alone."""


def is_zero(array: np.ndarray) -> bool:
    """Whether every entry is 0 (float8 and 4-bit entries too, through float64)."""
    return bool(np.all(np.asarray(array, dtype=np.float64) == 0))


def owned_or_zero(view: NodeView, slot: int) -> Attrs | None:
    """Drop rule of an input whose absence means zeros: the op's own node may leave out what it
    drew, a template's node only zeros. Never a graph tensor (its consumer would be lost)."""
    array = view.array(slot)
    if array is None or not (view.own or is_zero(array)):
        return None
    return view.attrs


def quantize_zero_point(view: NodeView, slot: int) -> Attrs | None:
    """QuantizeLinear's zero point also types its output: uint8 where absent, unless opset 21's
    output_dtype names another type, which is then written."""
    if owned_or_zero(view, slot) is None:
        return None
    array = view.array(slot)
    assert array is not None
    to = helper.np_dtype_to_tensor_dtype(array.dtype)
    declared = int(view.attrs.get("output_dtype", 0))
    if declared not in (0, to):
        return None
    if to == TensorProto.UINT8 or declared == to:
        return view.attrs
    if not has_attribute(view.op_type, "output_dtype", view.opset):
        return None
    return {**view.attrs, "output_dtype": to}


def ratio_in_inference(view: NodeView, slot: int) -> Attrs | None:
    """Dropout's ratio (0.5 absent) is read only in training mode, which no node written is in:
    it may be left out wherever training_mode is absent or a constant false."""
    training = view.given(2)
    mode = view.known.array(training) if training else np.zeros((), bool)
    if view.array(slot) is None or mode is None or bool(np.any(mode)):
        return None
    return view.attrs


def equal_parts(view: NodeView, slot: int) -> Attrs | None:
    """Split before 18 without `split` cuts one equal part per output: sizes that are all equal
    (and as many as the outputs) may be left out. From 18 a count must then be named
    (num_outputs), which the spec writes itself."""
    sizes = view.array(slot)
    if sizes is None or has_attribute("Split", "num_outputs", view.opset):
        return None
    return view.attrs if sizes.size == view.outputs and len(set(sizes.tolist())) == 1 else None


def empty_float(view: NodeView, slot: int) -> tuple[np.ndarray, Attrs] | None:
    """Resize's roi, and its scales beside sizes, present as the empty float tensor Resize-11
    required and exporters still write: unused either way."""
    if view.op_type == "Resize" and slot == 2 and not view.given(3):
        return None  # scales are what the node resizes by: absent only beside sizes
    return np.zeros([0], np.float32), view.attrs


def zero_of_data(view: NodeView, slot: int) -> tuple[np.ndarray, Attrs] | None:
    """Pad's constant_value at 0 in the data's type, in any mode (the others ignore it)."""
    typed = view.known.typed(view.given(0))
    return None if typed is None else (np.zeros((), typed[1].numpy), view.attrs)


def full_lengths(view: NodeView, slot: int) -> tuple[np.ndarray, Attrs] | None:
    """Attention's nonpad_kv_seqlen at every key, per batch row: what its absence means. Not
    beside is_causal, which opsets 24 and 25 align differently against it."""
    typed = view.known.typed(view.given(1))
    if typed is None or int(view.attrs.get("is_causal", 0)):
        return None
    shape = typed[0]
    keys = shape[1] if len(shape) == 3 else shape[2]
    return np.full(shape[0], keys, np.int64), view.attrs


def _spec(name: str, absent: str, how: str) -> Slot:
    return Slot(name, absent, spec=how)


ZERO_BIAS = "a zero bias"
RECURRENT = (
    ("B", ZERO_BIAS),
    ("sequence_lens", "every sequence at full length"),
    ("initial_h", "a zero state"),
    ("initial_c", "a zero cell"),
    ("P", "no peepholes"),
)
"""RNN's, GRU's and LSTM's optional inputs from slot 3 (RNN and GRU take the first three)."""
OPTIONAL: dict[str, dict[int, Slot]] = {
    "Attention": {
        3: _spec("attn_mask", "no mask", "mask none, bool or float (Attention.mask)"),
        4: Slot("past_key", "no cache", never="a cache of length 0 is an empty tensor, which no model holds"),
        5: Slot("past_value", "no cache", never="a cache of length 0 is an empty tensor, which no model holds"),
        6: Slot("nonpad_kv_seqlen", "every key of every row", make=full_lengths),
    },
    "Clip": {
        1: _spec("min", "no lower bound", "Clip.form: both, min, max or none"),
        2: _spec("max", "no upper bound", "Clip.form: both, min, max or none"),
    },
    "Conv": {2: _spec("B", ZERO_BIAS, "Conv.bias, half the nodes")},
    "ConvTranspose": {2: _spec("B", ZERO_BIAS, "ConvTranspose.bias, half the nodes")},
    "ConvInteger": {
        2: _spec("x_zero_point", "0", "ConvInteger.zero_points: none, x, w or both"),
        3: _spec("w_zero_point", "0", "ConvInteger.zero_points: none, x, w or both"),
    },
    "DFT": {
        1: _spec("dft_length", "the signal's length", "DFT.with_length"),
        2: _spec("axis", "-2", "DFT.explicit, or an axis other than -2 (opset 20 on)"),
    },
    "DeformConv": {
        3: _spec("B", ZERO_BIAS, "DeformConv.bias"),
        4: _spec("mask", "ones", "DeformConv.mask"),
    },
    "DequantizeLinear": {2: Slot("x_zero_point", "0 in x's type", drop=owned_or_zero)},
    "Dropout": {
        1: Slot("ratio", "0.5", spec="Dropout.form: bare, ratio, training_off", drop=ratio_in_inference),
        2: _spec("training_mode", "false", "Dropout.form: training_off"),
    },
    "Gemm": {2: _spec("C", "0", "Gemm.c_shape none, or one of seven shapes")},
    "LayerNormalization": {2: _spec("B", ZERO_BIAS, "LayerNormalization.bias")},
    **{
        op: {
            slot: _spec(name, absent, f'{op}.present, 60% each ("" inside the list, trailing ones trimmed or not)')
            for slot, (name, absent) in enumerate(recurrent, start=3)
        }
        for op, recurrent in (
            ("RNN", RECURRENT[:3]),
            ("GRU", RECURRENT[:3]),
            ("LSTM", RECURRENT),
        )
    },
    "Loop": {
        0: _spec("M", "no trip count (a while loop)", "Loop.trip_count: left out where the body stops first"),
        1: _spec("cond", "true", "Loop.condition: absent or true"),
    },
    "MatMulInteger": {
        2: _spec("a_zero_point", "0", "MatMulInteger.zero_points: none, a, b, b_cols or both"),
        3: _spec("b_zero_point", "0", "MatMulInteger.zero_points: none, a, b, b_cols or both"),
    },
    "MaxUnpool": {2: _spec("output_shape", "the windows' extent", "MaxUnpool.extra")},
    "NegativeLogLikelihoodLoss": {2: _spec("weight", "ones", "NegativeLogLikelihoodLoss.weighted")},
    "SoftmaxCrossEntropyLoss": {2: _spec("weights", "ones", "SoftmaxCrossEntropyLoss.weighted")},
    "NonMaxSuppression": {
        2: Slot("max_output_boxes_per_class", "0", never="absent selects nothing: an empty output"),
        3: Slot("iou_threshold", "0: the same selection over disjoint clusters", drop=owned_or_zero),
        4: Slot("score_threshold", "none", never="absent keeps the boxes the spec places below it"),
    },
    "Pad": {
        2: Slot("constant_value", "0", spec="Pad.value_input (constant mode)", make=zero_of_data),
        3: _spec("axes", "every axis", "Pad.axes_input (opset 18 on)"),
    },
    "QLinearConv": {8: _spec("B", ZERO_BIAS, "QLinearConv.bias")},
    "QuantizeLinear": {2: Slot("y_zero_point", "0 in uint8, or in output_dtype", drop=quantize_zero_point)},
    **{
        op: {1: _spec("axes", "every axis", f"{op}.omit_axes, noop and empty_input")}
        for op in (
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceMax",
            "ReduceMean",
            "ReduceMin",
            "ReduceProd",
            "ReduceSum",
            "ReduceSumSquare",
        )
    },
    "Resize": {
        1: Slot("roi", "unused", make=empty_float),
        2: Slot("scales", "unused beside sizes", make=empty_float),
        3: _spec("sizes", "resize by scales", "Resize.by_sizes"),
    },
    "RotaryEmbedding": {3: _spec("position_ids", "caches already per token", "RotaryEmbedding.position_ids")},
    "STFT": {
        2: _spec("window", "ones", "STFT.window"),
        3: _spec("frame_length", "the window's length", "STFT.write_length"),
    },
    "Slice": {
        3: _spec("axes", "the first len(starts) axes", "Slice.omit_defaults"),
        4: _spec("steps", "ones", "Slice.omit_defaults"),
    },
    "Split": {1: Slot("split", "equal parts", spec="Split.equal: num_outputs (opset 18 on)", drop=equal_parts)},
    "Squeeze": {1: _spec("axes", "every size-1 axis", "Squeeze.omit_axes")},
    "TensorScatter": {2: _spec("write_indices", "zeros", "TensorScatter.indices")},
    "Trilu": {1: _spec("k", "0", "Trilu.k_input")},
}
"""Op -> optional input slot -> what its absence means and who draws its two forms."""
DRAWN: dict[str, dict[int, Slot]] = {
    op: {k: s for k, s in slots.items() if s.drop is not None or s.make is not None}
    for op, slots in OPTIONAL.items()
    if any(s.drop is not None or s.make is not None for s in slots.values())
}
"""The slots `OptionalInputs` draws: an op absent here is written as its spec wrote it."""


class OptionalInputs:
    """Draws the forms of the optional inputs in DRAWN for every node written, from the model's
    stream (as ExplicitDefaults draws attributes); `weight` (coverage feedback) tips each draw
    toward the form not seen yet."""

    def __init__(self, rng: random.Random, weight: BinWeight | None = None) -> None:
        self.rng = rng
        self.weight = weight

    def share(self, key: str, form: str) -> float:
        """The chance of drawing `form` (ABSENT or PRESENT) where the other is in hand."""
        if self.weight is None:
            return OPTIONAL_SHARE
        other = PRESENT if form == ABSENT else ABSENT
        mine = OPTIONAL_SHARE * (1 + self.weight(key, form))
        return mine / (mine + (1 - OPTIONAL_SHARE) * (1 + self.weight(key, other)))

    def fill(self, view: NodeView, add: Callable[[np.ndarray], str]) -> tuple[list[str], Attrs]:
        """The node's inputs and attributes with some droppable inputs left out and some
        makeable absent ones written (`add` names the value) at what their absence means."""
        inputs, attrs = list(view.inputs), dict(view.attrs)
        for slot, rule in DRAWN[view.op_type].items():
            if not may_omit(view.op_type, slot, view.opset):
                continue
            key = form_key(view.op_type, slot)
            now = NodeView(view.op_type, view.opset, inputs, view.outputs, attrs, view.own, view.known)
            if now.given(slot):
                dropped = rule.drop(now, slot) if rule.drop is not None else None
                if dropped is not None and self.rng.random() < self.share(key, ABSENT):
                    inputs, attrs = _without(inputs, slot), dict(dropped)
            elif rule.make is not None:
                made = rule.make(now, slot)
                if made is not None and self.rng.random() < self.share(key, PRESENT):
                    inputs, attrs = _with(inputs, slot, add(made[0])), dict(made[1])
        return inputs, attrs


def _without(inputs: list[str], slot: int) -> list[str]:
    """`inputs` with `slot` left out: named "" inside the list, trailing absences dropped."""
    out = [*inputs[:slot], "", *inputs[slot + 1 :]]
    while out and not out[-1]:
        out.pop()
    return out


def _with(inputs: list[str], slot: int, name: str) -> list[str]:
    out = [*inputs, *[""] * (slot + 1 - len(inputs))]
    out[slot] = name
    return out


@functools.cache
def optional_slots(op_type: str, opset: int) -> tuple[int, ...]:
    """The inputs of the op's schema at `opset` that a node may leave out."""
    schema = schema_at(op_type, opset)
    count = len(schema.inputs) if schema is not None else 0
    return tuple(i for i in range(count) if may_omit(op_type, i, opset))


def input_form(inputs: Sequence[str], slot: int) -> str:
    """ABSENT or PRESENT: how a node written with `inputs` has optional input `slot`."""
    return PRESENT if slot < len(inputs) and inputs[slot] else ABSENT


def form_key(op_type: str, slot: int) -> str:
    """The coverage key of an optional input's form, `Op.input<k>` (generator.coverage)."""
    return f"{op_type}.input{slot}"
