"""The rewrite-template contract: a subgraph a compiler rewrites, as one insertion.

Random growth almost never assembles the nine nodes of a LayerNorm or the five of an erf
Gelu, so a generator that only grows op by op never reaches the fusions where most
optimizer bugs live (2,000 generated models met one fusion in all). A template is written
as an OpSpec: its validity and shapes are z3 constraints like any op's, so it enters the
growing graph as one insertion, forward or backward, mixed with random growth, and every
model stays valid. It writes several ONNX nodes, all registry ops, so the witness, the
reference and the reducer see nothing but standard ONNX.

A template also comes in near misses: variants that break exactly one precondition the
rewrite must check (an axis, where the epsilon sits, a second consumer of the fused
intermediate, a constant that became a runtime input), while the model stays valid. A
compiler that rewrites a near miss anyway computes something else, and the reference
catches it. Each variant is its own class (`variants`), so coverage and steering count
them apart.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from generator.dtypes import DType
from generator.ops import registry
from generator.ops.base import Attrs, Emitter, OpSpec, has_attribute, list_operand, schema_dtypes
from generator.ops.families import negative_share
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

PREFIX = "pattern:"
"""How a template's op type starts (`pattern:LayerNorm~axis`): never an ONNX op type."""
EXACT = ""
"""The variant that meets every precondition: the rewrite should fire."""
COMMUTATIVE = frozenset(
    {"Add", "Mul", "Max", "Min", "Sum", "Mean", "And", "Or", "Xor", "Equal", "BitwiseAnd", "BitwiseOr", "BitwiseXor"}
)
"""Ops whose operands commute: a template writes them in a drawn order (Writer.op), since a
fusion that matches Mul(a, b) may miss, or mishandle, Mul(b, a)."""
LIFTED = "lifted_constant"
"""The near miss every lifting template (`Pattern.lifts`) comes in: its exact form with the
designated size-1 constant at one dim more than the data."""
LIFTED_DOC = (
    "a size-1 constant has one dim more than the data: the output gains a leading 1, which a"
    " rewrite that folds the constant away drops"
)
SCALAR_RANK_ZERO = 0.5
"""The share of a template's size-1 constants written as rank-0 scalars, as exporters mostly
write them; the rest take a rank from 1 up to the data's in a near miss, and rank 1 in an
exact form (whose rewrite should fire: onnxruntime folds no constant of rank 2 or more)."""


class Pattern(OpSpec):
    """One rewrite template in one variant."""

    template: ClassVar[str]
    source: ClassVar[str]
    """Which compilers perform the rewrite, and in which pass."""
    fires: ClassVar[tuple[str, ...]] = ()
    """Rewrite keys (generator.coverage.Coverage.rewrites) that show the rewrite fired."""
    uses: ClassVar[tuple[str, ...]]
    """The ONNX op types it writes whose schema and support must admit its dtype, each at
    its first input, or at input k where written `Op:k` (Where's data is its input 1)."""
    fixed_uses: ClassVar[dict[str, DType]] = {}
    """Ops it writes at a dtype of their own, whatever the template's (the uint8
    MatMulInteger behind a float32 template), checked at their first input."""
    near_misses: ClassVar[dict[str, str]] = {}
    """Variant -> the one precondition it breaks."""
    variant: ClassVar[str] = EXACT
    node_cost: ClassVar[int] = 3
    """About how many ONNX nodes it writes: what it counts toward a model's node budget."""
    second_output: ClassVar[bool] = False
    """The variant exposes the fused intermediate as a second output (a graph output, or a
    tensor later insertions read): the rewrite must keep it."""
    consumers: ClassVar[tuple[str, ...]] = ()
    """The family the op the rewrite fuses with ranges over (every pool, every conv-like op),
    first the one the template was written for: a rewrite that handles one member may start
    taking a sibling, and be wrong only where the sibling has attributes of its own. Each
    variant comes once per member it `admits`, written as the member's registered spec with
    its own attribute bins (`consumer_op`)."""
    consumer: ClassVar[str] = ""
    """This class's member of `consumers` ("" for a template without a family)."""
    tag: ClassVar[str] = ""
    """`@Member` in the name, for every member but the first a variant admits."""
    siblings: ClassVar[int] = 1
    """How many members its variant comes in: they share the variant's weight."""
    lifts: ClassVar[bool] = False
    """The template scales or shifts by a designated size-1 constant (`Writer.scalar(...,
    lift=True)`) downstream of any exposed intermediate, through broadcasting ops only: its
    LIFTED near miss gives that constant a dim more than the data, so that only the output
    gains the leading 1."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        super().__init__(sc, ins, out)
        self.lift = 0
        """Leading ones the output has over what the template computes without them."""
        if self.variant == LIFTED:
            self.lift = max(0, out.rank - ins[0].rank) if out is not None else 1

    variant_needs: ClassVar[dict[str, tuple[str, str]]] = {}
    """Variant -> the (op type, attribute) its form writes where an older version of the op
    lacks it: the variant exists from the version that brought it (per-axis Q/DQ writes
    QuantizeLinear's axis, from opset 13)."""

    @classmethod
    def exists_at(cls, opset: int) -> bool:
        if not cls.since_opset <= opset <= cls.until_opset:
            return False
        need = cls.variant_needs.get(cls.variant) if cls.variant_needs else None
        return need is None or has_attribute(*need, opset)

    @classmethod
    def admits(cls, variant: str, consumer: str) -> bool:
        """Whether `variant` comes with `consumer` (every member, unless a template says)."""
        return True

    def consumer_op(self, ins: Sequence[TType]) -> OpSpec:
        """The consumer as its registered spec over a tensor of `ins[0]`'s type: its
        attributes drawn as a lone insertion of it draws them (strides, dilations, pads or
        auto_pad, ceil_mode, count_include_pad, p, group...), its variables binned with the
        template's."""
        return registry()[self.consumer](self.sc, [TType(ins[0].dtype, ins[0].rank)])

    def lifted(self, shape: Sequence[Dim]) -> list[Dim]:
        return [1] * self.lift + list(shape)

    def writer(self, em: Emitter, outs: list[str], dtype: DType | None = None) -> Writer:
        """The template's Writer, drawing operand orders and constant ranks from its rng."""
        rank = self.inputs[0].rank if self.variant != EXACT else min(1, self.inputs[0].rank)
        return Writer(em, outs, dtype or self.inputs[0].dtype, self.rng, rank, self.lift)

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        dtype = cls.key_dtype(ins)
        slots = (use.partition(":") for use in cls.uses)
        fixed = all(dt in schema_dtypes(op, opset, 0) for op, dt in cls.fixed_uses.items())
        return fixed and all(dtype in schema_dtypes(op, opset, int(k or 0)) for op, _, k in slots)

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        return (*(use.partition(":")[0] for use in cls.uses), *cls.fixed_uses)

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        return [(use.partition(":")[0], key) for use in cls.uses] + list(cls.fixed_uses.items())

    @classmethod
    def name(cls) -> str:
        """`Template` or `Template~near_miss`, then `@Consumer` for a sibling consumer, as
        coverage counts it."""
        return _name(cls.template, cls.variant) + cls.tag

    def outputs(self, out: AbsTensor, middle: AbsTensor) -> list[AbsTensor]:
        """The output, and for a second-consumer variant the exposed intermediate."""
        return [out, middle] if self.second_output else [out]

    def exposed(self, outs: list[str]) -> str | None:
        """The name the exposed intermediate is written to (None: kept internal)."""
        return outs[1] if self.second_output else None

    def dims(self, em: Emitter) -> list[int]:
        """The first input's dims, as emitted."""
        return [em.ival(d) for d in self.inputs[0].shape]

    @staticmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        raise TypeError("a template is written as standard ONNX ops; their references compute it")


class Writer:
    """Writes a template's nodes: fresh intermediate names derived from the node's first
    output (unique in the model), constants in the template's dtype, and the opset's
    spelling of axes. With the template's rng it draws what every template must range over
    without each saying so: the operand order of every commutative op, and the rank of
    every size-1 constant."""

    def __init__(
        self, em: Emitter, outs: list[str], dtype: DType, rng: random.Random | None = None, rank: int = 0, lift: int = 0
    ) -> None:
        """`rank`: the highest rank a size-1 constant takes (at most the data's); `lift`: the
        dims the designated constant takes over the data's rank (Pattern.lift)."""
        self.em = em
        self.outs = outs
        self.dtype = dtype
        self.rng = rng
        self.rank = rank
        self.lift = lift
        self.made = 0

    def op(self, op_type: str, ins: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        """Write one node; its output is `out`, or a fresh intermediate name. A commutative
        op's operands come in a drawn order."""
        operands = list(ins)
        if op_type in COMMUTATIVE and len(operands) > 1 and self.rng is not None:
            self.rng.shuffle(operands)
        return self.in_order(op_type, operands, out, **attrs)

    def in_order(self, op_type: str, ins: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        """`op` with the operands in the order given: for a near miss about the order."""
        out = self.fresh(out)
        self.em.node(op_type, list(ins), [out], **attrs)
        return out

    def fresh(self, out: str | None = None) -> str:
        """`out`, or a fresh intermediate name (for a node another spec writes)."""
        if out is None:
            out = f"{self.outs[0]}_{self.made}"
            self.made += 1
        return out

    def scalar(self, value: float, lift: bool = False, runtime: bool = False) -> str:
        """A size-1 constant (a graph input with `runtime`) at a drawn rank from 0 up to the
        data's; the designated one (`lift`) of a lifted template takes one dim more."""
        if lift and self.lift:
            rank = self.rank + self.lift
        elif self.rng is None or self.rng.random() < SCALAR_RANK_ZERO:
            rank = 0
        else:
            rank = self.rng.randint(1, max(self.rank, 1))
        array = np.full([1] * rank, value, dtype=self.dtype.numpy)
        return self.runtime(array) if runtime else self.em.const(array)

    def array(self, values: object) -> np.ndarray:
        """Values in the template's dtype."""
        return np.asarray(values, dtype=self.dtype.numpy)

    def const(self, values: object) -> str:
        return self.em.const(self.array(values))

    def reduce(self, op_type: str, x: str, axes: list[int], keepdims: int = 1, out: str | None = None) -> str:
        operand, spelled = list_operand(self.em, op_type, "axes", axes, constant=True)
        return self.op(op_type, [x, *operand], out, keepdims=keepdims, **spelled)

    def runtime(self, values: np.ndarray) -> str:
        """A value the template needs as a graph input rather than a constant (a near miss
        whose constant became a runtime input)."""
        return self.em.runtime(np.asarray(values))

    def index(self, op_type: str, i: int, size: int) -> int:
        """Index `i` into a dim of `size`, written from the end as often as the op's family
        draws it (generator.ops.families.NEGATIVE_INDEX)."""
        share = negative_share(op_type)
        return i - size if share and self.rng is not None and self.rng.random() < share else i


def variants(cls: type[Pattern]) -> list[type[Pattern]]:
    """The template's exact form and one class per near miss, each once per consumer it
    admits."""
    out: list[type[Pattern]] = []
    for variant in (EXACT, *cls.near_misses, *((LIFTED,) if cls.lifts else ())):
        members = [c for c in cls.consumers if cls.admits(variant, c)] or [""]
        out += [_variant(cls, variant, c, i, len(members)) for i, c in enumerate(members)]
    return out


def _name(template: str, variant: str) -> str:
    return template + (f"~{variant}" if variant else "")


def _variant(cls: type[Pattern], variant: str, consumer: str = "", index: int = 0, siblings: int = 1) -> type[Pattern]:
    tag = f"@{consumer}" if index else ""
    attrs = {
        "variant": variant,
        "consumer": consumer,
        "tag": tag,
        "siblings": siblings,
        "uses": cls.uses if not consumer or consumer in cls.uses else (*cls.uses, consumer),
        "op_type": PREFIX + _name(cls.template, variant) + tag,
        "second_output": variant == "second_consumer",
        "__doc__": cls.near_misses.get(variant, LIFTED_DOC if variant == LIFTED else cls.__doc__),
    }
    return type(f"{cls.__name__}_{variant or 'exact'}{'_' + consumer if consumer else ''}", (cls,), attrs)


class SameShapePattern(Pattern):
    """A template whose output has its input's shape and type (normalizations,
    activations, eliminations): nothing to solve, and backward insertion knows its input."""

    min_rank: ClassVar[int] = 1
    max_rank: ClassVar[int] = 4

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        """The output's type, or for the LIFTED near miss one rank less."""
        same = super().backward_inputs(out, rng)
        if same is None or cls.variant != LIFTED:
            return same
        return [TType(out.dtype, out.rank - 1)] if out.rank - 1 >= cls.min_rank else None

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        shape = list(ins[0].shape)
        return self.outputs(AbsTensor(ins[0].dtype, self.lifted(shape)), AbsTensor(ins[0].dtype, shape))

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        if any(d != 1 for d in out_shape[: self.lift]):
            return None
        return [list(out_shape[self.lift :])]
