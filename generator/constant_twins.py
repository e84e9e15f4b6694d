"""A node's constant twin: a copy of one node (and, in some cases, of what it reads, up to two
producers up) whose every input is an initializer, written beside the graph with its own output.

A converter folds a node whose every input is a constant with code of its own, at import:
TVM's ONNX frontend divides two integer constants with numpy and its own rounding toward
zero, and folds Add, Mul, Shape, Concat, Gather and the rest of its shape arithmetic the
same way; onnxruntime runs such nodes in a graph transformer before the session's first
run. That code is what a pull request changes, and no runtime input reaches it. Generated
graphs mostly grow from one graph input, so a node whose every input was constant came up
in 1.6% of nodes, and a two-input one in a few per thousand (100 cases drawn).

The twin reads the values its original read in this case (the witness holds every
tensor's value while the graph grows), so its inputs are already safe for it; its output
is one more graph output, judged against the reference like every other.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from generator.focus import FOCUS_SHARE

TWIN_SALT = 0x7A1D
"""Salts the seed for the twin's draws, so that a case without a twin is the very model it
was before twins existed."""

PREFIX = "k"
"""Twin tensors are named `k<n>`; no other generated name starts with it."""

DEPTHS = (0, 0, 1, 2)
"""How many producers up a twin copies (each as often as it is listed): 0 folds one node,
1 and 2 fold a chain, as a shape computation is folded."""

NOT_TWINNED = frozenset({"Constant", "RandomUniformLike", "RandomNormalLike", "Multinomial", "Bernoulli", "Dropout"})
"""Ops with no inputs to make constant, or whose output no two runs share."""


def twin_draw(seed: int, share: float) -> random.Random | None:
    """The twin's own random stream when the seed's case gets a constant twin, else None."""
    rng = random.Random(seed ^ TWIN_SALT)
    return rng if share > 0 and rng.random() < share else None


PLAIN = frozenset(
    {
        torch.bool,
        torch.float16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.uint16,
        torch.uint32,
        torch.uint64,
    }
)
"""The types whose torch value is its ONNX value: bfloat16 has no numpy type, and a 4-bit or
float8 value is held under a tag (generator.ops.narrow) that an initializer cannot be."""


def _plain(value: object) -> np.ndarray | None:
    """A value as an array an initializer can hold; None for a sequence, an optional or a
    type outside PLAIN."""
    if not isinstance(value, torch.Tensor) or value.dtype not in PLAIN:
        return None
    return value.detach().numpy()


def _twinnable(node: onnx.NodeProto, env: Mapping[str, object], constants: set[str]) -> bool:
    if node.op_type in NOT_TWINNED or node.domain not in ("", "ai.onnx"):
        return False
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        return False
    reads = [i for i in node.input if i]
    if not reads or all(i in constants for i in reads):
        return False  # nothing to make constant, or already folded as it stands
    known = all(i in constants or _plain(env.get(i)) is not None for i in reads)
    return known and all(_plain(env.get(o)) is not None for o in node.output if o)


def _chain(nodes: list[onnx.NodeProto], last: int, depth: int) -> list[int]:
    """`last` and the nodes up to `depth` producers above it, in graph order."""
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    chosen, frontier = {last}, {last}
    for _ in range(depth):
        frontier = {producer[i] for n in frontier for i in nodes[n].input if i in producer} - chosen
        chosen |= frontier
    return sorted(chosen)


def with_constant_twin(
    model: onnx.ModelProto, env: Mapping[str, object], rng: random.Random, prefer: Collection[str] = ()
) -> onnx.ModelProto | None:
    """A copy of `model` with one node's constant twin; None when no node can have one.
    Where a node of an op in `prefer` (the ops a diff names) can have it, it is the twin's
    in FOCUS_SHARE of cases: a change to an op's converter is where its folding changes."""
    g = model.graph
    nodes = list(g.node)
    constants = {i.name for i in g.initializer}
    eligible = [i for i, n in enumerate(nodes) if _twinnable(n, env, constants)]
    if not eligible:
        return None
    named = [i for i in eligible if nodes[i].op_type in prefer]
    last = rng.choice(named if named and rng.random() < FOCUS_SHARE else eligible)
    # A producer that cannot be twinned is left out: its consumer reads its value as a constant.
    chain = [i for i in _chain(nodes, last, rng.choice(DEPTHS)) if i in eligible]
    renamed: dict[str, str] = {}
    twin = onnx.ModelProto()
    twin.CopyFrom(model)

    def fresh(name: str) -> str:
        renamed[name] = f"{PREFIX}{len(renamed)}"
        return renamed[name]

    for i in chain:
        node = nodes[i]
        ins = []
        for name in node.input:
            if not name or name in constants or name in renamed:
                ins.append(renamed.get(name, name))
                continue
            array = _plain(env[name])
            assert array is not None  # _twinnable saw to it
            twin.graph.initializer.append(numpy_helper.from_array(array, fresh(name)))
            ins.append(renamed[name])
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        del copy.input[:], copy.output[:]
        copy.input.extend(ins)
        copy.output.extend(fresh(o) if o else "" for o in node.output)
        copy.name = f"{PREFIX}_{node.name or node.op_type}_{i}"
        twin.graph.node.append(copy)
    for o in filter(None, nodes[last].output):
        value = _plain(env[o])
        assert value is not None
        elem = helper.np_dtype_to_tensor_dtype(value.dtype)
        twin.graph.output.append(helper.make_tensor_value_info(renamed[o], elem, list(value.shape)))
    return twin
