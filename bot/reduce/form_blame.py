"""A reduced failure that one spelling of its model alone shows: axes counted from the back.

ONNX lets an axis be written from the back (-1) or from the front (rank - 1), and the two
models are one. onnxruntime 1.17.3 and 1.18.0 mishandle Resize's negative `axes`: a refusal
at load ("Scale value should be greater than 0"), a refusal at run ("Rank of input and output
tensor should be same") and a wrong output shape were three reports of that one defect in
one campaign, each named by its own check or kernel. So the reduced trigger is asked again
with every negative axis written from the front; where that alone makes the build right, the
spelling is the bug, named `<ops> with negative axes` whatever the symptom, as a rewrite
whose absence alone makes the build right names a bug (bot.reduce.rewrite_blame).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper

from backends.reference import trace_reference
from bot.reduce.candidates import ClientPool
from bot.reduce.reduced import Reduced
from generator.ops.narrow import as_numpy
from oracles.judging import Judging
from oracles.verdict import Verdict

NEGATIVE_AXES = "with negative axes"
_AXES = ("axis", "axes")


def name_guilty_form(reduced: Reduced, pool: ClientPool, judging: Judging) -> str:
    """`<ops> with negative axes` when writing the reduced trigger's negative axes from the
    front makes the build right on every ask; "" otherwise."""
    bundle = reduced.bundle
    spelled, ops = positive_axes(bundle.model, bundle.inputs)
    if not ops or not reduced.finding.verdict.is_bug:
        return ""
    ev = judging.compute(spelled, bundle.inputs)
    if ev.reference is None:
        return ""

    def ask() -> Verdict:
        with pool.lend() as client:
            return judging.judge(ev, client.run(spelled.SerializeToString(), bundle.inputs)).verdict

    right = judging.asking.every_showing(ask, lambda v: v is Verdict.pass_)
    return f"{'+'.join(sorted(ops))} {NEGATIVE_AXES}" if right is not None else ""


def positive_axes(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> tuple[onnx.ModelProto, set[str]]:
    """The model with every negative `axis` or `axes` attribute of a top-level node written
    from the front, and the op types that had one (none where the reference cannot trace the
    model, which gives the ranks)."""
    if not any(a.name in _AXES and _negative(a) for n in model.graph.node for a in n.attribute):
        return model, set()
    trace = trace_reference(model, inputs)
    if trace.error is not None:
        return model, set()
    spelled = onnx.ModelProto()
    spelled.CopyFrom(model)
    ops: set[str] = set()
    for node in spelled.graph.node:
        first = trace.env.get(node.input[0]) if node.input else None
        if first is None:
            continue
        for i, attr in enumerate(node.attribute):
            if attr.name not in _AXES or not _negative(attr):
                continue
            rank = np.ndim(as_numpy(first)) + (len(attr.ints) if node.op_type == "Unsqueeze" else 0)
            values = [v + rank if v < 0 else v for v in (attr.ints if attr.ints else [attr.i])]
            value: int | list[int] = values if attr.ints else values[0]
            node.attribute[i].CopyFrom(helper.make_attribute(attr.name, value))
            ops.add(node.op_type)
    return spelled, ops


def _negative(attr: onnx.AttributeProto) -> bool:
    if attr.type == onnx.AttributeProto.INT:
        return attr.i < 0
    return attr.type == onnx.AttributeProto.INTS and any(v < 0 for v in attr.ints)


__all__ = ["NEGATIVE_AXES", "name_guilty_form", "positive_axes"]
