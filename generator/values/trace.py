"""Unsafe positions traced back through data-movement ops to the leaf elements behind them.

A failure's unsafe positions fold onto a leaf's shape only along an elementwise path;
behind a Gather, Transpose, Slice, Tile, Concat or Reshape, the few elements that matter
lie elsewhere in the leaf. When every op between a leaf and the failing operand only
moves elements or maps each in place (a Cast, an Add of a constant), the path is run
once more on an index tensor (the leaf's flat positions + 1 as int64, 0 for every other
source of elements) with the same indices, axes and shapes, which tells exactly which
leaf element lands at each position. Any other op on the way (a reduction, a Where, an
elementwise op with the leaf on two inputs) gives no trace, and the caller falls back to
its untraced redraw.
"""

from __future__ import annotations

import numpy as np
import torch

from generator.values.interp import Failure, Node, Program
from generator.values.leaves import fold

MOVES = frozenset(
    {
        "Identity",
        "Reshape",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Transpose",
        "Expand",
        "Tile",
        "Concat",
        "Slice",
        "Gather",
        "GatherND",
        "GatherElements",
        "Split",
        "DepthToSpace",
        "SpaceToDepth",
        "Pad",
        "Trilu",
    }
)
"""Ops whose outputs are copies of their data inputs' elements, placed by the other inputs."""

PASS = frozenset(
    {
        "Cast",
        "CastLike",
        "Neg",
        "Abs",
        "Relu",
        "LeakyRelu",
        "Elu",
        "Selu",
        "Sigmoid",
        "HardSigmoid",
        "Tanh",
        "Exp",
        "Log",
        "Sqrt",
        "Floor",
        "Ceil",
        "Round",
        "Sign",
        "Not",
        "Reciprocal",
        "Sin",
        "Cos",
        "Softplus",
        "Softsign",
        "Erf",
        "Atan",
        "Sinh",
        "Cosh",
        "Asinh",
        "IsNaN",
        "IsInf",
        "Clip",
        "Shrink",
        "ThresholdedRelu",
        "Mish",
        "HardSwish",
        "Gelu",
    }
)
"""Elementwise ops of one data input: each output position comes from the same input position."""

BROADCAST = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Max",
        "Min",
        "Sum",
        "Mean",
        "Mod",
        "PRelu",
        "Greater",
        "Less",
        "Equal",
        "GreaterOrEqual",
        "LessOrEqual",
        "And",
        "Or",
        "Xor",
    }
)
"""Elementwise ops with broadcasting: traced when one input only carries the leaf's elements
(each position then depends on the one leaf element broadcast there). Where is left out:
a condition computed from the leaf moves its elements by value, which no trace shows."""

DATA = {"Concat": None, **dict.fromkeys(BROADCAST)}
"""Inputs that carry elements (None: all of them); every other op: only input 0."""


def traced_marks(program: Program, failure: Failure, names: list[str]) -> dict[str, torch.Tensor]:
    """For each leaf of `names` reached from the failing operands only through MOVES: the
    mask of its elements that land on an unsafe position (leaves with no such trace are left
    out). Empty when the failure carries no positions or no intermediate values."""
    if failure.bad is None or failure.env is None:
        return {}
    out: dict[str, torch.Tensor] = {}
    for slot in failure.slots():
        if slot >= len(failure.node.inputs) or not failure.node.inputs[slot]:
            continue
        operand = failure.operands[slot]
        if operand is None:
            continue
        bad = fold(failure.bad, tuple(operand.shape))
        if bad is None:
            continue
        x = failure.node.inputs[slot]
        for name in names:
            if name not in program.ancestors.get(x, frozenset()):
                continue
            index = _index(program, failure.env, name, x)
            if index is None or tuple(index.shape) != tuple(bad.shape):
                continue
            hit = index[bad]
            hit = hit[hit > 0] - 1
            shape = tuple(failure.env[name].shape) if name in failure.env else None
            if shape is None:
                continue
            mask = torch.zeros(int(torch.Size(shape).numel()), dtype=torch.bool)
            mask[hit] = True
            mask = mask.view(shape)
            out[name] = out[name] | mask if name in out else mask
    return out


def _index(program: Program, env: dict[str, torch.Tensor], leaf: str, target: str) -> torch.Tensor | None:
    """`target` recomputed with `leaf` replaced by its flat positions; None unless every op
    between them moves or passes elements (or the target is the leaf itself)."""
    base = env.get(leaf)
    if base is None:
        return None
    if target == leaf:
        return _positions(base)
    cone = _cone(program, leaf, target)
    if cone is None:
        return None
    values: dict[str, torch.Tensor] = {leaf: _positions(base)}
    for i in sorted(cone):
        node = cone[i]
        outs = _traced_outputs(node, values, env)
        if outs is None:
            return None
        for name, v in zip(node.outputs, outs, strict=False):
            if name:
                values[name] = v
    return values.get(target)


def _cone(program: Program, leaf: str, target: str) -> dict[int, Node] | None:
    """The nodes between `leaf` and `target`, by index; None when one of them is not traceable."""
    cone: dict[int, Node] = {}
    todo = [target]
    while todo:
        node = program.producer.get(todo.pop())
        if node is None or node.index in cone or leaf not in program.ancestors.get(node.outputs[0], frozenset()):
            continue
        if node.op_type not in MOVES and node.op_type not in PASS and node.op_type not in BROADCAST:
            return None
        cone[node.index] = node
        data = DATA.get(node.op_type, (0,))
        todo.extend(x for k, x in enumerate(node.inputs) if x and (data is None or k in data))
    return cone


def _traced_outputs(
    node: Node, values: dict[str, torch.Tensor], env: dict[str, torch.Tensor]
) -> list[torch.Tensor] | None:
    """One node run on position tensors: copied through PASS ops, broadcast through BROADCAST
    ops, and run for real (on the intermediate indices and shapes) for MOVES."""
    if node.op_type in PASS:
        v = values.get(node.inputs[0])
        return None if v is None else [v]
    if node.op_type in BROADCAST:
        v = _broadcast(node, values, env)
        return None if v is None else [v]
    data = DATA.get(node.op_type, (0,))
    ops: list[torch.Tensor | None] = []
    for k, x in enumerate(node.inputs):
        if not x:
            ops.append(None)
        elif data is None or k in data:
            v = values.get(x)
            if v is None:
                known = env.get(x)
                if known is None:
                    return None
                v = torch.zeros(tuple(known.shape), dtype=torch.int64)
            ops.append(v)
        elif node.op_type == "Pad" and k == 2:
            ops.append(torch.zeros((), dtype=torch.int64))  # padding: no element of the leaf
        elif x in values or x not in env:
            return None  # the leaf's elements place themselves (a Gather on its own indices)
        else:
            ops.append(env[x])
    try:
        return list(node.run(node.attrs, ops))
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError):
        return None


def _positions(t: torch.Tensor) -> torch.Tensor:
    """Each element's flat position + 1 (0: no element of the leaf lands there)."""
    return torch.arange(1, t.numel() + 1, dtype=torch.int64).view(t.shape)


def _broadcast(node: Node, values: dict[str, torch.Tensor], env: dict[str, torch.Tensor]) -> torch.Tensor | None:
    shapes = [tuple(env[x].shape) if x in env else None for x in node.inputs if x]
    if any(sh is None for sh in shapes):
        return None
    out = np.broadcast_shapes(*(sh for sh in shapes if sh is not None))
    traced = [values[x] for x in node.inputs if x and x in values]
    if len(traced) != 1:
        return None  # the leaf on more than one input: a position depends on several elements
    return traced[0].expand(out).contiguous()
