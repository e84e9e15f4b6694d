"""The operator spec contract and the operator registry.

A spec is everything the rest of the system needs to know about one ONNX op type:
what it accepts (z3 constraints), what it produces (shape transfer), how it is
written to ONNX, and what it computes (a torch implementation used by the
reference interpreter). Keeping the four together means a new op cannot be
generated without also being checkable.
"""

from __future__ import annotations

import functools
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, TypeAlias, cast

import numpy as np
import onnx
import onnx.defs
import onnx.helper
import torch

from generator.dtypes import FLOATS, DType
from generator.symbolic import AbsTensor, Cond, Dim, SymCtx, TType

Attrs = dict[str, Any]
Reference: TypeAlias = Callable[[Attrs, list[torch.Tensor]], list[torch.Tensor]]
"""One node's computation: attributes and inputs in, outputs out."""

OLDEST_OPSET = 7
"""The oldest default-domain opset the reference computes: older nodes carried legacy forms
(consumed_inputs, is_test) and defaults (Concat-1's axis) that no spec reads."""
OLDEST_WRITTEN = 11
"""The oldest default-domain opset the generator writes (generator.emit.IR_VERSION starts
there): exporters still write 11 and 12, and converters keep code for those versions alone
(Squeeze's axes attribute, Softmax's 2-D coercion), which no newer model reaches."""
CURRENT_OPSET = 21
"""The opset whose attributes every `reference` reads. An attribute a node's version has and
this one lacks was either removed since (an old form: a spec lists those it reads in
`old_attrs`) or added later; either is refused, never silently ignored."""

MAX_WORK = 1 << 20
"""Cap on one op's work, in multiply-accumulates or window cells visited (`OpSpec.work`),
next to the element cap of every tensor (SymCtx.max_elements, 4096 by default). Small tensors
alone do not bound it: a Conv or pool with a 50x90x130 window over heavily padded input does
hundreds of millions of steps to make a few hundred outputs, which costs the value search's
reference evaluations (hundreds per model) and every backend's naive kernels alike, and is no
better a test than a window a thousand times smaller."""
_ONNX_NAME = {"float32": "float", "float64": "double"}


class Unending(NotImplementedError):
    """A computation the reference stopped because it would not end within its bound (a Loop
    whose condition never turns false and that has no trip count). No other reading may be
    asked for instead: `onnx.reference` runs such a Loop until memory runs out, and a
    60-second demo campaign was killed by the kernel at 23 GB doing so on a reduction's
    candidate."""


class Emitter(Protocol):
    """What an op may do while it is being written into an ONNX graph."""

    opset: int
    values: np.random.Generator
    """The case's value generator: constants an op owns are drawn from it at emission."""

    def ival(self, term: Dim) -> int: ...

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None: ...

    def const_i64(self, values: Sequence[int]) -> str: ...

    def const(self, array: np.ndarray) -> str: ...

    def weight(self, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> str: ...

    def runtime(self, array: np.ndarray) -> str: ...

    def shape_operand(self, values: Sequence[int] | np.ndarray, dtype: type = ...) -> str: ...


class OpSpec(ABC):
    """One ONNX op type; an instance is one node being inserted into a graph."""

    op_type: ClassVar[str]
    arity: ClassVar[int] = 1
    arities: ClassVar[tuple[int, ...]] = ()
    """A variadic op's input counts, as often as each is drawn (a count twice: twice as often)."""
    min_rank: ClassVar[int] = 1
    max_rank: ClassVar[int] = 4
    dtypes: ClassVar[tuple[DType, ...]] = FLOATS
    since_opset: ClassVar[int] = OLDEST_WRITTEN
    """The first opset the spec writes its op at: OLDEST_WRITTEN, or the opset the op arrived
    in (tests/generator/test_old_opsets.py holds every spec to its op's schema history). The forms an
    op's versions differ in are the spec's to write by the opset (`takes_input`,
    `has_attribute`, `schema_allows`)."""
    until_opset: ClassVar[int] = 99
    """The last opset with them (an op whose meaning changed gets a second spec or a version branch)."""

    def __init__(self, sc: SymCtx, ins: Sequence[TType], out: TType | None = None) -> None:
        """`out` is set for backward insertion: the type the node must produce."""
        self.sc = sc
        self.ins = list(ins)
        self.out = out
        self.inputs: list[AbsTensor] = []

    def bind(self, ins: list[AbsTensor]) -> tuple[list[Cond], list[AbsTensor]]:
        """Attach symbolic inputs; returns the validity constraints and the outputs."""
        self.inputs = ins
        return self.requires(ins), self.transfer(ins)

    @property
    def rng(self) -> random.Random:
        return self.sc.rng

    @classmethod
    def draw_arity(cls, rng: random.Random) -> int:
        """How many inputs this node will take: drawn from `arities` for a variadic op."""
        return rng.choice(cls.arities) if cls.arities else cls.arity

    @classmethod
    def takes(cls, count: int) -> bool:
        """Whether a node of this op may have `count` inputs."""
        return count in cls.arities if cls.arities else count == cls.arity

    @classmethod
    def slot_ok(cls, slot: int, t: TType) -> bool:
        return t.dtype in cls.dtypes and cls.min_rank <= t.rank <= cls.max_rank

    @classmethod
    def accepts(cls, ins: Sequence[TType]) -> bool:
        """Cheap type matching before any solver call (NNSmith's TypeMatch)."""
        return all(cls.slot_ok(i, t) for i, t in enumerate(ins)) and len({t.dtype for t in ins}) == 1

    @classmethod
    def support_ops(cls) -> tuple[str, ...]:
        """The op types whose support (probed per backend) this spec needs at its key dtype."""
        return (cls.op_type,)

    @classmethod
    def support_keys(cls, key: DType) -> list[tuple[str, DType]]:
        """The (op type, key dtype) pairs a backend must run for this spec at key dtype `key`."""
        return [(op, key) for op in cls.support_ops()]

    node_cost: ClassVar[int] = 1
    """What one insertion counts toward a model's node budget (a rewrite template writes several)."""

    @classmethod
    def exists_at(cls, opset: int) -> bool:
        return cls.since_opset <= opset <= cls.until_opset

    reference_since: ClassVar[int] = 1
    """The oldest version of the op (a schema since_version) whose meaning `reference_at` gives:
    older versions meant something the reference does not compute, and are refused."""
    old_attrs: ClassVar[frozenset[str]] = frozenset()
    """Attributes of older versions, since removed (Squeeze-11's axes), that the reference reads."""

    @classmethod
    def refusal(cls, version: int, attrs: Attrs) -> str | None:
        """Why the reference cannot compute a node of this version with these attributes, or
        None. Read from the node alone, so that a user's model is refused before it is judged
        rather than judged by a reading of the wrong version."""
        if version < cls.reference_since:
            oldest = f"{cls.op_type}-{cls.reference_since}"
            return f"{cls.op_type}-{version} is older than the reference computes ({oldest} on)"
        unread = sorted(set(attrs) - {OUTPUTS, CAPTURED} - current_attrs(cls.op_type) - cls.old_attrs)
        if unread:
            return f"{cls.op_type}-{version} attribute {', '.join(unread)} is not computed by the reference"
        return None

    @classmethod
    def reference_at(cls, version: int) -> Reference:
        """The computation of the op at `version` (a schema since_version): `reference`, which
        reads the current meaning, unless an older version meant something else."""
        return cast(Reference, cls.reference)

    @classmethod
    def key_slot(cls, ins: Sequence[TType]) -> int:
        """The input that carries the op's main type parameter."""
        return 0

    @classmethod
    def key_dtype(cls, ins: Sequence[TType]) -> DType:
        """The dtype the per-backend support matrix is keyed by: the op's main type parameter."""
        return ins[cls.key_slot(ins)].dtype

    @classmethod
    def schema_allows(cls, opset: int, ins: Sequence[TType]) -> bool:
        """Whether the ONNX schema in force at `opset` admits the key dtype (Add takes int8
        only from opset 14 on, IsInf float16 only from 20): a spec's `dtypes` is the union
        over opsets, this is the check for one."""
        slot = cls.key_slot(ins)
        if ins[slot].dtype is DType.bfloat16 and not floats_take_bfloat16(cls.op_type, opset):
            return False
        return ins[slot].dtype in schema_dtypes(cls.op_type, opset, slot)

    @classmethod
    def backward_inputs(cls, out: TType, rng: random.Random) -> list[TType] | None:
        """Input types from which this op can produce `out`, or None if it never can."""
        if out.dtype not in cls.dtypes or not cls.min_rank <= out.rank <= cls.max_rank:
            return None
        return [out] * cls.arity

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        """For backward insertion: input shapes that produce `out_shape`, when the op can
        name them without the solver (shape-preserving and broadcasting ops). None means
        the inputs get fresh symbolic dims and the solver finds them."""
        return None

    def work(self, val: Callable[[Dim], int]) -> int:
        """Multiply-accumulates (or window cells) one evaluation takes, read once the insertion
        is solved: `val` gives a dim or attribute term its value. The grower refuses an op whose
        work exceeds MAX_WORK. Ops whose work the element cap already bounds return 0."""
        return 0

    @abstractmethod
    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        """Constraints on inputs and attributes under which the op is valid."""

    @abstractmethod
    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        """Symbolic output types."""

    @abstractmethod
    def emit(self, em: Emitter, ins: list[str], outs: list[str]) -> None:
        """Write the op as ONNX nodes; symbolic attributes are read through `em.ival`."""

    @staticmethod
    @abstractmethod
    def reference(attrs: Attrs, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Eager torch semantics of the ONNX node, read from its attributes alone."""


class SameShapeOp(OpSpec):
    """An op whose one output has its first input's shape and dtype (or the one `result_dtype`
    says: a cast, a quantization), whatever its attributes: nothing to solve, and backward
    insertion knows the input at once."""

    def requires(self, ins: list[AbsTensor]) -> list[Cond]:
        return []

    def result_dtype(self, ins: list[AbsTensor]) -> DType:
        return ins[0].dtype

    def transfer(self, ins: list[AbsTensor]) -> list[AbsTensor]:
        return [AbsTensor(self.result_dtype(ins), list(ins[0].shape))]

    def concrete_inputs(self, out_shape: list[int]) -> list[list[int]] | None:
        return [list(out_shape)]


def full_and_lower_rank(out: TType, min_rank: int, rng: random.Random) -> list[TType]:
    """Two inputs for an op whose output takes the larger input rank: one input has
    the output's rank, the other any rank down to `min_rank`, in random order."""
    other = TType(out.dtype, rng.randint(min_rank, out.rank))
    return [out, other] if rng.random() < 0.5 else [other, out]


_ONNX_TYPES = {f"tensor({name})": d for d in DType for name in [_ONNX_NAME.get(d.value, d.value)]}


@functools.cache
def schema_dtypes(op_type: str, opset: int, slot: int) -> frozenset[DType]:
    """fuzzbot dtypes the schema of `op_type` at `opset` allows for input `slot`."""
    schema = onnx.defs.get_schema(op_type, opset)
    formal = schema.inputs[min(slot, len(schema.inputs) - 1)]
    allowed = next(
        (tc.allowed_type_strs for tc in schema.type_constraints if tc.type_param_str == formal.type_str),
        [formal.type_str],
    )
    return frozenset(_ONNX_TYPES[t] for t in allowed if t in _ONNX_TYPES)


@functools.cache
def schema_at(op_type: str, opset: int) -> onnx.defs.OpSchema | None:
    """The default-domain schema in force at `opset`; None where the op does not exist yet."""
    try:
        return onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None


@functools.cache
def takes_input(op_type: str, name: str, opset: int) -> bool:
    """Whether the op at `opset` takes `name` as an input: before the version that moved it
    there (Squeeze, Unsqueeze, Split and ReduceSum at 13, the other Reduce* at 18) it is an
    attribute of that name, which a node of an older opset must spell instead."""
    schema = schema_at(op_type, opset)
    return schema is not None and any(f.name == name for f in schema.inputs)


def list_operand(
    em: Emitter, op_type: str, name: str, values: Sequence[int], *, constant: bool = False
) -> tuple[list[str], Attrs]:
    """`values` as the op at the emitter's opset takes them: an int64 operand (a shape
    operand, which may be a runtime input; a plain initializer with `constant`) where `name`
    is an input, else the attribute `name`. Returns (the extra inputs, the attributes)."""
    if takes_input(op_type, name, em.opset):
        return [em.const_i64(values) if constant else em.shape_operand(values)], {}
    return [], {name: [int(v) for v in values]}


@functools.cache
def attribute_default(op_type: str, name: str, opset: int) -> Any:
    """The default of attribute `name` in the op's schema at `opset`, None where it has none:
    a default may change with the version (Softmax's axis is 1 before 13, -1 from 13), and a
    spec that leaves an attribute out must mean the default of the version it writes."""
    schema = schema_at(op_type, opset)
    attr = schema.attributes.get(name) if schema is not None else None
    if attr is None or attr.default_value.type == onnx.AttributeProto.UNDEFINED:
        return None
    return onnx.helper.get_attribute_value(attr.default_value)


@functools.cache
def may_omit(op_type: str, slot: int, opset: int) -> bool:
    """Whether input `slot` of the op at `opset` is optional (an empty name stands for it):
    Resize takes roi and scales as required inputs before 13, an empty tensor where unused."""
    schema = schema_at(op_type, opset)
    if schema is None or slot >= len(schema.inputs):
        return False
    return schema.inputs[slot].option == onnx.defs.OpSchema.FormalParameterOption.Optional


@functools.cache
def has_attribute(op_type: str, name: str, opset: int) -> bool:
    """Whether the op's schema at `opset` has attribute `name` (ArgMax's select_last_index
    from 12, GatherND's batch_dims from 12, Dropout's seed from 12): one it lacks would fail
    the checker, and one a spec draws must not be written before it exists."""
    schema = schema_at(op_type, opset)
    return schema is not None and name in schema.attributes


@functools.cache
def bfloat16_crosses(opset: int) -> bool:
    """Whether a bfloat16 tensor can cross the graph's boundary at `opset`: it does through a
    Cast from and to float32 (generator.emit.BF16_BOUNDARY), and Cast takes bfloat16 from
    Cast-13 on. Before it, an op whose schema takes every type (Unique-11) would take it too."""
    return DType.bfloat16 in schema_dtypes("Cast", opset, 0)


@functools.cache
def floats_take_bfloat16(op_type: str, opset: int) -> bool:
    """Whether every type parameter of the op's schema at `opset` that admits float32 admits
    bfloat16 too: a spec writes its other float operands (Dropout's ratio) in x's type, and
    Dropout-13 takes x but not a ratio in bfloat16 (Dropout-22 takes both)."""
    schema = onnx.defs.get_schema(op_type, opset)
    floats = [set(tc.allowed_type_strs) for tc in schema.type_constraints if "tensor(float)" in tc.allowed_type_strs]
    return all("tensor(bfloat16)" in allowed for allowed in floats)


OUTPUTS = "_outputs"
"""Not an ONNX attribute: how many outputs the node has. A few ops take a count from it
alone (Split before opset 18 makes one part per output), and a reference function sees
attributes and inputs only, so every interpreter passes it as an attribute."""


CAPTURED = "_captured"
"""Not an ONNX attribute either: the outer tensors a node's subgraphs read (an If's branches
read the values they transform from the enclosing graph). Every interpreter passes their
values after the node's own inputs, in this order, so a reference sees them as inputs and
a walk back to the leaves goes through them."""


def captured_names(node: onnx.NodeProto) -> tuple[str, ...]:
    """The outer tensors `node`'s subgraphs read, in the order they are first read."""
    seen: dict[str, None] = {}
    for a in node.attribute:
        for g in (a.g,) if a.type == onnx.AttributeProto.GRAPH else tuple(a.graphs):
            for name in _outer_reads(g):
                seen.setdefault(name)
    return tuple(seen)


def _outer_reads(g: onnx.GraphProto) -> list[str]:
    defined = {v.name for v in g.input} | {t.name for t in g.initializer}
    reads: list[str] = []
    for n in g.node:
        inner = [*n.input, *captured_names(n)]
        reads += [x for x in inner if x and x not in defined]
        defined.update(n.output)
    reads += [o.name for o in g.output if o.name not in defined]
    return reads


def node_attrs(node: onnx.NodeProto, version: int | None = None) -> Attrs:
    """A node's attributes as the `reference` functions read them (strings decoded, the
    output count under OUTPUTS), so that every interpreter of the registry passes them the
    same way. Absent float attributes get the schema's default of the op's `version` (the
    newest without one): ONNX float attributes are float32, and a reference's own fallback
    (`attrs.get("epsilon", 1e-5)`) would be the double, which a float64 re-run then shows."""
    out: Attrs = {OUTPUTS: len(node.output)}
    outer = captured_names(node)
    if outer:
        out[CAPTURED] = outer
    if node.domain in ("", "ai.onnx"):
        out.update(float_defaults(node.op_type, version))
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


@functools.cache
def op_version(op_type: str, opset: int) -> int:
    """The version (schema since_version) of a default-domain op in a model importing
    `opset`; onnx.defs.SchemaError when the op does not exist there."""
    return int(onnx.defs.get_schema(op_type, opset, "").since_version)


@functools.cache
def float_defaults(op_type: str, version: int | None = None) -> dict[str, float]:
    """The FLOAT attributes of an op's schema with their defaults (float32 values, exact as
    Python floats); none for an op onnx.defs does not know."""
    try:
        schema = onnx.defs.get_schema(op_type, version or onnx.defs.onnx_opset_version(), "")
    except onnx.defs.SchemaError:
        return {}
    return {
        name: float(a.default_value.f)
        for name, a in schema.attributes.items()
        if a.type == onnx.defs.OpSchema.AttrType.FLOAT and a.default_value.HasField("f")
    }


@functools.cache
def _default_domain_schemas() -> dict[str, list[onnx.defs.OpSchema]]:
    """Every version of every default-domain schema, by op type: read once, since a walk over
    all schemas costs milliseconds and emission asks about every op it writes."""
    found: dict[str, list[onnx.defs.OpSchema]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain == "":
            found.setdefault(s.name, []).append(s)
    return found


@functools.cache
def current_attrs(op_type: str) -> frozenset[str]:
    """The attribute names of the op at CURRENT_OPSET, or at its first version for an op that
    arrived later (RMSNormalization at 23): the newest schema would admit what later versions
    added before the reference reads it."""
    schemas = _default_domain_schemas().get(op_type, [])
    at_current = [s for s in schemas if s.since_version <= CURRENT_OPSET]
    chosen = (
        max(at_current, key=lambda s: s.since_version) if at_current else min(schemas, key=lambda s: s.since_version)
    )
    return frozenset(chosen.attributes)


_REGISTRY: dict[str, type[OpSpec]] = {}


def register(cls: type[OpSpec]) -> type[OpSpec]:
    if cls.op_type in _REGISTRY:
        raise ValueError(f"op type {cls.op_type} registered twice")
    if takes_bfloat16(cls):
        cls.dtypes = (*cls.dtypes, DType.bfloat16)
    _REGISTRY[cls.op_type] = cls
    return cls


BFLOAT16_SCHEMA_OPSET = 26
"""The opset whose schema says which ops take bfloat16 (opset 22 added it to most float ops
that lacked it); `OpSpec.schema_allows` still checks the opset each case is written at."""


NO_BFLOAT16 = {
    "BitCast": "its targets are the integers of float32's and float64's widths",
    "QuantizeLinear": "its spec writes a float32 scale, which must share x's type",
    "MeanVarianceNormalization": "its function body adds a float32 epsilon: onnx's shape inference refuses it",
    "SoftmaxCrossEntropyLoss": "its function body's NegativeLogLikelihoodLoss takes no bfloat16 before opset 22",
}
"""Ops whose schema admits bfloat16 but whose spec or function body puts float32 beside it."""


def takes_bfloat16(cls: type[OpSpec]) -> bool:
    """Whether a spec takes bfloat16: wherever it takes float32 and the op's schema admits
    bfloat16 at its main input. One rule rather than a type list per spec, so that no float
    op is left out by oversight; a case reaches bfloat16 only when it starts from it
    (generator.dtypes.WIDE), and the builds' probes and the reference decide the rest."""
    if DType.float32 not in cls.dtypes or DType.bfloat16 in cls.dtypes or cls.op_type in NO_BFLOAT16:
        return False
    newest = min(cls.until_opset, BFLOAT16_SCHEMA_OPSET)
    if newest < cls.since_opset or not onnx.defs.has(cls.op_type):
        return False
    try:
        return DType.bfloat16 in schema_dtypes(cls.op_type, newest, 0)
    except onnx.defs.SchemaError:
        return False


def registry() -> dict[str, type[OpSpec]]:
    """The registered specs; importing generator.ops fills it."""
    return dict(_REGISTRY)


def axis_of(attrs: Attrs, key: str, default: int, rank: int) -> int:
    """The attribute `key` as an axis in [0, rank): ONNX lets a node spell it negatively."""
    a = int(attrs.get(key, default))
    return a + rank if a < 0 else a


def norm_axes(axes: Sequence[int], rank: int) -> list[int]:
    """A list of axes, each in [0, rank), sorted."""
    return sorted(a + rank if a < 0 else a for a in axes)
