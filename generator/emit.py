"""Writing a solved graph as an ONNX ModelProto with onnx.helper.

Names are positional (t<id>, w<n>, c<n>) and every value comes from the case's numpy
generator in the order nodes are written (as they are inserted, when the graph grows
with its values), so one seed yields identical bytes.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx.defs
from onnx import helper, numpy_helper

from generator import onnx_checks
from generator.binning import ABSENT, AT_DEFAULT, BinWeight, Solution
from generator.dtypes import DType
from generator.graph import Fragment, GNode, Graph
from generator.ops.base import current_attrs
from generator.ops.optional import DRAWN, NodeView, OptionalInputs
from generator.symbolic import AbsTensor, Dim

NodeHook = Callable[[GNode, list[onnx.NodeProto]], None]

PRODUCER = "fuzzbot"
IR_VERSION = {
    11: 6,
    12: 7,
    13: 7,
    14: 7,
    15: 8,
    16: 8,
    17: 8,
    18: 8,
    19: 9,
    20: 9,
    21: 10,
    22: 10,
    23: 11,
    24: 12,
    25: 13,
    26: 13,
}
"""Lowest IR version per opset (onnx.helper.VERSION_TABLE), so that older runtimes load the
model: a runtime refuses an IR version newer than it knows even where it knows the opset."""
NEWEST_OPSET = max(IR_VERSION)
"""The newest default-domain opset the generator writes: every op spec was audited up to it
(checker, strict shape inference, the torch reference and onnxruntime 1.31.1, which loads
nothing newer; tests/generator/test_opset_range.py)."""


def draw_values(rng: np.random.Generator, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> np.ndarray:
    """Uniform values; floats are scaled by 1/sqrt(fan_in) as in common weight init, so
    activations stay near unit scale and float32 rounding stays far below tolerance."""
    if dtype.is_float:
        bound = 1.0 / np.sqrt(max(fan_in, 1))
        return rng.uniform(-bound, bound, size=tuple(shape)).astype(dtype.numpy)
    if dtype is DType.bool:
        return rng.random(size=tuple(shape)) < 0.5
    low = 0 if dtype.is_unsigned else -8
    return rng.integers(low, 9, size=tuple(shape)).astype(dtype.numpy)


BF16_BOUNDARY = "_float32"
"""The suffix of the float32 graph input or output that a bfloat16 tensor crosses the
graph's boundary as, through a Cast: onnxruntime's Python binding takes and gives no
bfloat16 array, and an exported mixed-precision model casts into and out of it likewise."""
OFF_GRID = 2.0**-10
"""How far (relatively) a bfloat16 leaf's float32 input lies off the bfloat16 value it
stands for: below half of bfloat16's spacing (2**-9 relatively, at least), so the Cast in
rounds it to that value, never a tie; but off it, so a build that skips or truncates the
rounding is wrong by a whole bfloat16 step."""


OFF_GRID_SHARE = 0.5
"""The share of bfloat16 cases whose inputs lie off the grid: in the rest the Cast in changes
no value, so a build that gets that rounding wrong (TVM 0.27 fuses it away) still shows its
other bfloat16 bugs."""


def boundary_name(name: str) -> str:
    return f"{name}{BF16_BOUNDARY}"


def off_grid(values: np.ndarray) -> np.ndarray:
    """bfloat16 values as float32 inputs that the Cast into bfloat16 rounds back to them,
    alternately from above and below (see OFF_GRID)."""
    exact = np.asarray(values).astype(np.float32)
    sign = np.where(np.arange(exact.size) % 2 == 0, 1.0, -1.0).reshape(exact.shape)
    return (exact * (1.0 + sign * OFF_GRID)).astype(np.float32)


RUNTIME_PREFIX = "r"
"""How a generated model names a graph input that holds a fixed value, `r<n>` (a runtime
shape or scale, `OnnxEmitter.runtime`): part of the model's validity, so no value search
and no edge input ever moves it."""


def is_runtime_constant(name: str) -> bool:
    """Whether graph input `name` is a runtime constant (or the float32 twin of a bfloat16 one)."""
    name = name.removesuffix(BF16_BOUNDARY)
    return name[:1] == RUNTIME_PREFIX and name[1:].isdigit()


def tname(i: int) -> str:
    """The ONNX name of graph tensor `i`."""
    return f"t{i}"


WINDOW_WEIGHT = {"Conv": 1, "ConvInteger": 1, "ConvTranspose": 1, "DeformConv": 1, "QLinearConv": 3}
"""Where each windowed op's weight sits: its spatial rank (the weight's rank less two) tells
how long a list default is when the node writes no kernel_shape."""
LIST_DEFAULTS: dict[str, dict[str, int]] = {
    **{op: {"strides": 1, "dilations": 1, "pads": 0} for op in (*WINDOW_WEIGHT, "MaxPool", "AveragePool", "LpPool")},
    "ConvTranspose": {"strides": 1, "dilations": 1, "pads": 0, "output_padding": 0},
    "MaxUnpool": {"strides": 1, "pads": 0},
}
"""Defaults the schema cannot carry, being one value per spatial axis (two for pads): the
spec's words "default is 1 along each spatial axis" and "default is 0 along start and end"."""
NEVER_EXPLICIT = {
    ("RNN", "activations"): "the schema's default lists two, one per direction of a bidirectional RNN,"
    " where the spec has a one-way RNN take one: written on a forward RNN it is a form the spec does not"
    " describe",
}
"""Defaulted attributes never written out at their default, with why."""
EXPLICIT_SHARE = 1 / 3
"""The share of a node's absent defaulted attributes written out at their default value
(before coverage feedback weighs the two forms): a kernel may take another path when the
attribute is present, even at its default (explicit dilations of ones, pads of zeros)."""


@functools.cache
def schema_defaults(op_type: str, opset: int) -> dict[str, Any]:
    """Attribute -> its default, for the attributes of the op's schema at `opset` that have
    one and that the reference reads (an attribute added after CURRENT_OPSET would be
    refused). List defaults (LIST_DEFAULTS) map to their per-axis value."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return {}
    read = current_attrs(op_type)
    found: dict[str, Any] = {}
    for name, a in schema.attributes.items():
        if name not in read or (op_type, name) in NEVER_EXPLICIT:
            continue
        if name in LIST_DEFAULTS.get(op_type, {}):
            found[name] = LIST_DEFAULTS[op_type][name]
        elif a.default_value.type != onnx.AttributeProto.UNDEFINED:
            value = helper.get_attribute_value(a.default_value)
            if isinstance(value, list):
                value = [v.decode() if isinstance(v, bytes) else v for v in value]
            found[name] = value.decode() if isinstance(value, bytes) else value
    return found


def at_default(op_type: str, name: str, value: Any, default: Any) -> bool:
    """Whether a written attribute holds its default (a list default: every entry of it)."""
    if name in LIST_DEFAULTS.get(op_type, {}):
        return isinstance(value, list | tuple) and all(v == default for v in value)
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, list | tuple):
        value = [v.decode() if isinstance(v, bytes) else v for v in value]
        return list(value) == list(default)
    if isinstance(value, float) or isinstance(default, float):
        return bool(np.float32(value) == np.float32(default))
    return bool(value == default)


ALWAYS_WRITTEN = frozenset({("MeanVarianceNormalization", "axes"), ("STFT", "onesided")})
"""Attributes a spec writes even at their default, never left out, as onnx misreads them
absent: its full check expands MeanVarianceNormalization's function body, whose Constant
has no value without `axes` (a checker bug at every opset), and its shape inference (1.23)
reads an absent `onesided` of STFT as 0, against the schema's default of 1."""


class ExplicitDefaults:
    """Writes a seeded share of each node's absent defaulted attributes out at their default
    value, and leaves out a share of those a spec wrote at their default, so that "absent"
    and "present at default" are both drawn for every attribute of every op the generator
    writes, in one place, whichever a spec would have written. Coverage counts the two apart
    (generator.coverage: `Op.attr=absent`, `Op.attr=default`); `weight` (the coverage
    feedback's bin weight) tips the draw toward the one not seen yet."""

    def __init__(self, rng: random.Random, weight: BinWeight | None = None) -> None:
        self.rng = rng
        self.weight = weight

    def share(self, key: str) -> float:
        if self.weight is None:
            return EXPLICIT_SHARE
        explicit = EXPLICIT_SHARE * (1 + self.weight(key, AT_DEFAULT))
        absent = (1 - EXPLICIT_SHARE) * (1 + self.weight(key, ABSENT))
        return explicit / (explicit + absent)

    def fill(self, op_type: str, opset: int, attrs: dict[str, Any], spatial: int | None) -> dict[str, Any]:
        """`attrs` with some absent defaulted attributes added at their default (a list
        default only where the spatial rank is known and the node pads explicitly), and
        some written at their default left out (half as often as an absent one is added)."""
        defaults = schema_defaults(op_type, opset)
        if not defaults:
            return attrs
        out = dict(attrs)
        lists = LIST_DEFAULTS.get(op_type, {})
        for name, default in defaults.items():
            share = self.share(f"{op_type}.{name}")
            if name in attrs:
                if (op_type, name) in ALWAYS_WRITTEN:
                    continue
                if at_default(op_type, name, attrs[name], default) and self.rng.random() < (1 - share) / 2:
                    del out[name]
            elif self.rng.random() >= share:
                continue
            elif name not in lists:
                out[name] = default
            elif spatial is not None and not (name == "pads" and pads_implied(attrs)):
                out[name] = [default] * (2 * spatial if name == "pads" else spatial)
        return out


def pads_implied(attrs: Mapping[str, Any]) -> bool:
    """Pads may not be written beside an auto_pad other than NOTSET, nor beside
    ConvTranspose's output_shape (which sets them)."""
    auto = attrs.get("auto_pad", "NOTSET")
    return (auto.decode() if isinstance(auto, bytes) else auto) != "NOTSET" or "output_shape" in attrs


def spatial_rank(op_type: str, inputs: Sequence[str], attrs: Mapping[str, Any], ranks: Mapping[str, int]) -> int | None:
    """A windowed op's spatial rank: its kernel_shape's length, else its weight's rank less
    two, else its data's; None where none is known."""
    if op_type not in LIST_DEFAULTS:
        return None
    if "kernel_shape" in attrs:
        return len(attrs["kernel_shape"])
    for slot in (WINDOW_WEIGHT.get(op_type, 0), 0):
        if slot < len(inputs) and inputs[slot] in ranks:
            return ranks[inputs[slot]] - 2
    return None


class OnnxEmitter:
    """The Emitter an op writes itself through, one graph node at a time (`write`), so that
    a node can be written as soon as it is inserted (generator.witness runs it at once).
    Names count up over the emitter's life, never reused, whatever is later kept."""

    def __init__(self, opset: int, values: np.random.Generator, runtime_shapes: float = 0.0) -> None:
        """`runtime_shapes`: the share of shape-like operands (shapes, starts and ends,
        repeats, axes, pads) written as graph inputs instead of initializers."""
        self.runtime_shapes = runtime_shapes
        self.solution = Solution(None)
        """The solution of the node being emitted; its attribute terms are read through it."""
        self.opset = opset
        self.values = values
        self.fragment = Fragment()
        self.made_nodes = 0
        self.made_arrays = 0
        self.fan_in: dict[str, int] = {}
        """The fan-in each weight was drawn for (`draw_values`), so it can be drawn anew."""
        self.explicit: ExplicitDefaults | None = None
        """Writes absent defaulted attributes out at their default (None: never)."""
        self.ranks: dict[str, int] = {}
        """The ranks of the tensors the node being written reads and owns, as far as known."""
        self.optional: OptionalInputs | None = None
        """Draws optional inputs absent and present (None: never)."""
        self.writer = ""
        """The op type of the spec being written (a template's `pattern:` name)."""
        self.graph_inputs: dict[str, AbsTensor] = {}
        """The graph tensors the node being written reads."""
        self.dropped: set[str] = set()
        """Values of the node being written that an optional input's drop left unread."""

    def write(self, n: GNode) -> Fragment:
        """Emit one graph node; its tensors are named `tname(id)`."""
        self.solution = n.solution
        self.fragment = Fragment()
        self.graph_inputs = {tname(i): t for i, t in zip(n.inputs, n.op.inputs, strict=False)}
        self.ranks = {name: t.rank for name, t in self.graph_inputs.items()}
        self.writer = n.op.op_type
        self.dropped = set()
        n.op.emit(self, [tname(i) for i in n.inputs], [tname(o) for o in n.outputs])
        if self.dropped:
            self._prune()
        return self.fragment

    def _prune(self) -> None:
        """Forget the values that dropped optional inputs held, unless another node reads them
        (a template may hand one zero point to a Q and its DQ)."""
        read = {x for node in self.fragment.nodes for x in node.input}
        for name in self.dropped - read:
            self.fragment.arrays.pop(name, None)
            self.fragment.runtime.pop(name, None)
            self.fan_in.pop(name, None)

    def array(self, name: str) -> np.ndarray | None:
        """A value the node being written made (generator.ops.optional.Known)."""
        found = self.fragment.arrays.get(name)
        return self.fragment.runtime.get(name) if found is None else found

    def typed(self, name: str) -> tuple[list[int], DType] | None:
        """The shape and type of a tensor the node being written reads, where known."""
        t = self.graph_inputs.get(name)
        if t is not None:
            return [self.ival(d) for d in t.shape], t.dtype
        found = self.array(name)
        if found is None:
            return None
        try:
            return list(found.shape), DType.from_numpy(found.dtype)
        except ValueError:  # a 4-bit or float8 value: no DType names it
            return None

    def ival(self, term: Dim) -> int:
        return self.solution.eval(term)

    def node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attrs: Any) -> None:
        if self.optional is not None and op_type in DRAWN:
            inputs, attrs = self._optional_inputs(op_type, inputs, len(outputs), attrs)
        if self.explicit is not None:
            spatial = spatial_rank(op_type, inputs, attrs, self.ranks)
            attrs = self.explicit.fill(op_type, self.opset, attrs, spatial)
        name = f"n{self.made_nodes}_{op_type}"
        self.made_nodes += 1
        self.fragment.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=name, **attrs))

    def _optional_inputs(
        self, op_type: str, inputs: Sequence[str], outputs: int, attrs: dict[str, Any]
    ) -> tuple[list[str], dict[str, Any]]:
        """The node's optional inputs drawn absent or present (generator.ops.optional)."""
        assert self.optional is not None
        view = NodeView(op_type, self.opset, inputs, outputs, attrs, op_type == self.writer, self)
        written, attrs = self.optional.fill(view, self.const)
        self.dropped.update(set(inputs) - set(written) - {""})
        return written, attrs

    def const_i64(self, values: Sequence[int]) -> str:
        return self._initializer("c", np.asarray(values, dtype=np.int64))

    def const(self, array: np.ndarray) -> str:
        """An op-owned constant of any dtype (clip bounds, shift amounts, indices)."""
        return self._initializer("c", np.asarray(array))

    def shape_operand(self, values: Sequence[int] | np.ndarray, dtype: type = np.int64) -> str:
        """A shape-like operand: a constant, or (the `runtime_shapes` share of the time) a
        graph input holding the same values, which a compiler cannot fold as a constant
        (constant folding over runtime values is where TVM and onnxruntime bugs live)."""
        array: np.ndarray = np.asarray(values, dtype=dtype)
        if self.runtime_shapes and self.values.random() < self.runtime_shapes:
            return self.runtime(array)
        return self._initializer("c", array)

    def runtime(self, array: np.ndarray) -> str:
        """A value the node reads as a graph input of its own."""
        name = f"{RUNTIME_PREFIX}{self.made_arrays}"
        self.made_arrays += 1
        self.fragment.runtime[name] = np.asarray(array)
        self.ranks[name] = self.fragment.runtime[name].ndim
        return name

    def weight(self, shape: Sequence[int], dtype: DType, fan_in: int = 1) -> str:
        name = self._initializer("w", draw_values(self.values, shape, dtype, fan_in))
        self.fan_in[name] = fan_in
        return name

    def _initializer(self, prefix: str, array: np.ndarray) -> str:
        name = f"{prefix}{self.made_arrays}"
        self.made_arrays += 1
        self.fragment.arrays[name] = array
        self.ranks[name] = array.ndim
        return name


def emit_model(
    graph: Graph,
    opset: int,
    values: np.random.Generator,
    as_weight: set[int],
    on_node: NodeHook | None = None,
    leaves: Mapping[str, np.ndarray] | None = None,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Build the ModelProto; placeholders in `as_weight` become initializers, the rest inputs.

    A node already written while the graph grew (`GNode.fragment`) is used as written;
    `leaves` then holds the values of placeholders and weights (generator.witness), and
    `values` draws only what it lacks. Otherwise every value is drawn here, placeholders
    first, in one order per graph.
    `on_node` sees each graph node with the ONNX nodes it was written as (coverage).
    """
    em = OnnxEmitter(opset, values)
    leaves = leaves or {}
    io = _GraphIO(values)
    for p in sorted(graph.placeholders):
        t = graph.tensors[p]
        array = leaves.get(tname(p))
        if array is None:
            array = draw_values(values, [em.ival(d) for d in t.shape], t.dtype)
        if p in as_weight:
            io.initializers.append(numpy_helper.from_array(array, tname(p)))
        else:
            io.data_input(tname(p), array, t.dtype, [em.ival(d) for d in t.shape])
    for n in graph.topological():
        fragment = n.fragment if n.fragment is not None else em.write(n)
        io.nodes += fragment.nodes
        io.initializers += [numpy_helper.from_array(leaves.get(k, a), k) for k, a in fragment.arrays.items()]
        for k, a in fragment.runtime.items():
            io.runtime_input(k, a, before=len(fragment.nodes))
        if on_node is not None:
            on_node(n, fragment.nodes)
    for o in graph.sinks():
        io.output(tname(o), graph.tensors[o].dtype, [em.ival(d) for d in graph.tensors[o].shape])
    g = helper.make_graph(io.nodes, "fuzzbot_graph", io.graph_inputs, io.outputs, initializer=io.initializers)
    proto = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name=PRODUCER,
        ir_version=IR_VERSION.get(opset, 8),
    )
    return proto, io.inputs


class _GraphIO:
    """The graph's inputs, outputs, nodes and initializers as `emit_model` collects them; a
    bfloat16 tensor crosses the boundary as a float32 twin through a Cast (BF16_BOUNDARY)."""

    def __init__(self, values: np.random.Generator) -> None:
        self.values = values
        self.inputs: dict[str, np.ndarray] = {}
        self.graph_inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []
        self.off: bool | None = None
        """Whether this case's bfloat16 inputs lie off the grid (drawn at the first one)."""

    def data_input(self, name: str, array: np.ndarray, dtype: DType, shape: list[int]) -> None:
        if dtype is not DType.bfloat16:
            self.inputs[name] = array
            self.graph_inputs.append(helper.make_tensor_value_info(name, dtype.onnx, shape))
            return
        self.off = self.values.random() < OFF_GRID_SHARE if self.off is None else self.off
        self._cast_in(name, off_grid(array) if self.off else array.astype(np.float32), len(self.nodes))

    def runtime_input(self, name: str, array: np.ndarray, before: int) -> None:
        """A runtime constant, read by the last `before` nodes; a bfloat16 one crosses exactly
        (it is part of the model's validity)."""
        if DType.from_numpy(array.dtype) is DType.bfloat16:
            self._cast_in(name, array.astype(np.float32), len(self.nodes) - before)
            return
        self.inputs[name] = array
        self.graph_inputs.append(
            helper.make_tensor_value_info(name, DType.from_numpy(array.dtype).onnx, list(array.shape))
        )

    def _cast_in(self, name: str, twin: np.ndarray, at: int) -> None:
        outside = boundary_name(name)
        self.inputs[outside] = twin
        self.graph_inputs.append(helper.make_tensor_value_info(outside, onnx.TensorProto.FLOAT, list(twin.shape)))
        self.nodes.insert(at, helper.make_node("Cast", [outside], [name], name=outside, to=DType.bfloat16.onnx))

    def output(self, name: str, dtype: DType, shape: list[int]) -> None:
        if dtype is not DType.bfloat16:
            self.outputs.append(helper.make_tensor_value_info(name, dtype.onnx, shape))
            return
        outside = boundary_name(name)
        self.outputs.append(helper.make_tensor_value_info(outside, onnx.TensorProto.FLOAT, shape))
        self.nodes.append(helper.make_node("Cast", [name], [outside], name=outside, to=onnx.TensorProto.FLOAT))


SYMBOLIC_SALT = 0x5D1A
"""Keeps the symbolic-dims draw apart from every other draw made from the seed, so a case
that declares no symbolic dim is the very model it was before the feature existed."""
SEQUENCE_SHARE = 0.5
"""The share of symbolic cases that also declare a second (sequence) dim, as exports of
sequence models do beside the batch dim."""
INFERENCE_UNKNOWN = "unk__"
"""How onnx shape inference names a dim it cannot tell (`unk__3`), unique per dim."""
ROLES = ("batch", "sequence")
"""dim_param names by axis, as exporters write them: axis 0 is the batch, axis 1 the sequence."""


def symbolic_draw(seed: int, share: float) -> int:
    """How many leading dims (0, 1 or 2) this case declares symbolic, from a stream of its
    own: a share of 0 draws nothing at all."""
    if share <= 0:
        return 0
    rng = np.random.default_rng([seed, SYMBOLIC_SALT])
    if rng.random() >= share:
        return 0
    return 2 if rng.random() < SEQUENCE_SHARE else 1


def symbolic_names(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray], axes: int) -> dict[tuple[str, int], str]:
    """(input, axis) -> dim_param for the leading `axes` dims of each data input. A name is
    a promise that its dims are equal at run time, so dims share one only when they hold
    the same size at the same role; another size at that role gets a numbered name. Shape
    operands (`r<n>`) stay static: their length is the rank of what they shape. A dim of
    size 1 stays static too: it is what broadcasting stretches, and exporters write it so."""
    names: dict[tuple[str, int], str] = {}
    by_size: dict[tuple[int, int], str] = {}
    for v in model.graph.input:
        array = inputs.get(v.name)
        if array is None or is_runtime_constant(v.name):
            continue
        for axis in range(min(axes, array.ndim)):
            key = (axis, int(array.shape[axis]))
            if key[1] <= 1:
                continue
            if key not in by_size:
                taken = sum(1 for a, _ in by_size if a == axis)
                by_size[key] = ROLES[axis] if taken == 0 else f"{ROLES[axis]}{taken + 1}"
            names[(v.name, axis)] = by_size[key]
    return names


def with_symbolic_dims(model: onnx.ModelProto, names: Mapping[tuple[str, int], str]) -> onnx.ModelProto | None:
    """A copy whose inputs declare `names` as dim_params, its outputs re-inferred so that
    none claims a static dim that now depends on a symbolic one; None when the checker or
    strict shape inference refuses the symbolic model (it is then kept static)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for v in m.graph.input:
        for axis, d in enumerate(v.type.tensor_type.shape.dim):
            if (v.name, axis) in names:
                d.Clear()
                d.dim_param = names[(v.name, axis)]
    ranks = {o.name: len(o.type.tensor_type.shape.dim) for o in model.graph.output}
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    del m.graph.value_info[:]
    inferred = _strictly_inferred(m, check=False)
    if inferred is None:
        return None
    found = {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.output]}
    for o in m.graph.output:
        typed = found.get(o.name)
        shape = o.type.tensor_type.shape
        if typed is not None and typed.type.tensor_type.HasField("shape"):
            shape.CopyFrom(typed.type.tensor_type.shape)
            for d in shape.dim:
                if d.dim_param.startswith(INFERENCE_UNKNOWN):
                    d.Clear()  # inference's name for "unknown": no promise to make
        else:  # inference stops at a shape computed from a symbolic dim: the rank alone is known
            shape.dim.extend(onnx.TensorShapeProto.Dimension() for _ in range(ranks[o.name]))
    return m if _strictly_inferred(m, check=True) is not None else None


def _strictly_inferred(model: onnx.ModelProto, check: bool) -> onnx.ModelProto | None:
    """The model through strict shape inference (and, with `check`, the full checker); None
    where either refuses it."""
    try:
        inferred = onnx_checks.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
        if check:
            onnx_checks.check_model(inferred, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError, ValueError, RuntimeError):
        return None
    return inferred


def symbolic_dims(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Graph input -> the dim_params it declares (none: a static model)."""
    found: dict[str, list[str]] = {}
    for v in model.graph.input:
        params = [d.dim_param for d in v.type.tensor_type.shape.dim if d.dim_param]
        if params:
            found[v.name] = params
    return found
