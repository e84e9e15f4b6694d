"""Where a reduced failure starts: the first tensor the build computed wrong, and the kernel
that computed it.

A failure is often seen downstream of the bug that caused it. onnxruntime folds a Mul into
a MatMul as a FusedMatMul whose alpha it keeps in float32; a float64 campaign saw that
through the MatMul itself and through a Reciprocal after it, which computed the first wrong
*output*: two reports. Its "wrap" Pad writes zeros where it should repeat values, seen as
wrong values, and as a Div's "Integer division by zero" on a Pad of a Pad; its Resize at
`keep_aspect_ratio_policy` makes a wrong shape, seen as that, and as a GRU refusing its
sequence_lens. Each is one bug.

So the reduced model runs once more with the tensors the build kept (those of its
optimized graph, so the same fusions happen) made graph outputs, each judged by the
campaign's pipeline as an output would be. The first wrong one in graph order names the
bug: its kind of mismatch and the kernel that made it. A crash whose message names the
node it happened in (onnxruntime's "while running <Op> node. Name:'n1'") is blamed the
same way on its inputs, the graph cut before that node: when one of them is already wrong,
the crash is that wrong result's consequence. A death at run time with no message is
placed by cutting the graph after each node in turn: the first cut that dies the same way
names the kernel. Nothing found leaves the failure's own name.

A tensor can be right while the build's *static* shape of it is wrong. onnxruntime 1.18.0
infers an opset-11 Squeeze without axes, on an input of unknown shape, as a scalar: the
values it computes are right, but a Shape of it folds to an empty tensor at load, and every
consumer whose inference reads the rank refuses the model (an Unsqueeze's axes "beyond the
bounds", an EyeLike "must be 2-dimensional", a Flatten's axis, a Tile's repeats, an
Expand). One campaign reported that as ten regressions. So the cut graph also exposes a
`Shape` of each tensor it makes: the first tensor that is right while its Shape is wrong
names the bug as `static shape at <the kernel that made it>`, whichever consumer showed it.
A crash at load whose message names no node (a constant folding that ran a kernel on the
wrong shape) is placed by cutting the graph after each node in turn, as a death is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

import numpy as np
import onnx
from onnx import helper

from backends.reference import trace_reference
from backends.results import Stage, Status
from bot.findings.bundle import Bundle
from bot.reduce.candidates import ClientPool
from bot.reduce.function_body import body_ops, expand
from generator.ops.narrow import as_numpy
from oracles.asking import Asking
from oracles.bug_identity import Distance, same_bug
from oracles.judging import Judging
from oracles.references import UNFED_TYPES
from oracles.verdict import MEMORY_FAULT, Judgement, Symptom, Verdict, crash_kind, judge

_RUNNING = re.compile(r"while running (\w+) node\. Name:\s*'([^']*)'")
_LOADING = re.compile(r"Node \(([^)]*)\) Op \((\w+)\)")
"""onnxruntime's words for the node a check at load failed in (its shape and type inference)."""
STATIC_SHAPE = "static shape"
"""The kind of mismatch of a tensor computed right whose Shape the build gets wrong."""
_SHAPE_OF = "/static_shape"
FUNCTION_BODY = "function body"
"""The kernel of a failure that only the build's own expansion of a function op shows."""
MAX_CUTS = 16
"""Cuts tried to place a refusal whose message names no node: a reduced trigger has a few
nodes, and an unreduced finding folded by its blame is bounded in steps, not in a build's
seconds per load (TVM's are seconds)."""


@dataclass(frozen=True)
class Blame:
    """The first wrong tensor: its kind of mismatch, the kernel that made it, its name."""

    symptom: str
    kernel: str
    tensor: str

    @property
    def name(self) -> str:
        """`values at com.microsoft::FusedMatMul`: how a report is identified by it."""
        return f"{self.symptom} at {self.kernel}"


def crashed_node(model: onnx.ModelProto, message: str) -> int | None:
    """Index of the node a crash's message names, if it names one of the model's: by its
    name, or for a node without one, by its op type where one node has it."""
    if m := _RUNNING.search(message):
        op, name = m.groups()
    elif m := _LOADING.search(message):
        name, op = m.groups()
    else:
        return None
    found = [i for i, n in enumerate(model.graph.node) if (n.name == name if name else n.op_type == op)]
    return found[0] if len(found) == 1 else None


def _probe(
    model: onnx.ModelProto, upto: int, tensors: list[str], dtypes: Mapping[str, int], shapes: bool = False
) -> onnx.ModelProto:
    """The model's first `upto` nodes, with `tensors` as its outputs; with `shapes`, each
    followed by a Shape of it (`<tensor>/static_shape`)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.node[upto:]
    del probe.graph.output[:]
    for t in tensors:
        probe.graph.output.append(helper.make_tensor_value_info(t, dtypes[t], None))
        if shapes:
            probe.graph.node.append(helper.make_node("Shape", [t], [t + _SHAPE_OF]))
            probe.graph.output.append(helper.make_tensor_value_info(t + _SHAPE_OF, onnx.TensorProto.INT64, None))
    return probe


def _kept_tensors(model: onnx.ModelProto, upto: int, producers: dict[str, str] | None) -> list[str]:
    """The tensors of the first `upto` nodes, in graph order, that the build's optimized
    graph still has (all of them where the build reports no optimized graph)."""
    made = [t for n in model.graph.node[:upto] for t in n.output if t]
    return [t for t in made if producers is None or t in producers]


def blame(bundle: Bundle, pool: ClientPool, judging: Judging) -> Blame | None:
    """Where a reduced wrong result or crash starts on `pool`'s build: the first wrong
    tensor upstream of it, or for a death at run time the first node it dies at; None when
    nothing says more than the failure itself."""
    finding = bundle.finding
    assert finding is not None
    model = bundle.model
    if finding.verdict is Verdict.wrong_result:
        upto = len(model.graph.node)
        reads_shapes = any(n.op_type in ("Shape", "Size") and n.domain in ("", "ai.onnx") for n in model.graph.node)
        found = _through_body(_first_wrong(bundle, upto, pool, judging), bundle, pool, judging)
        return _earliest(model, found, reads_shapes, bundle, upto, pool, judging)
    if finding.verdict is not Verdict.crash:
        return None
    crashed = crashed_node(model, finding.message)
    at_load = finding.stage == Stage.compile.value
    if crashed is None and at_load and finding.symptom == Symptom.exception:
        crashed = _refused_at(bundle, pool, partial(same_bug, finding, distance=Distance.run))
    if crashed:
        # a refusal at load reads no input's values, only the shapes the build inferred
        found = None if at_load else _first_wrong(bundle, crashed, pool, judging)
        return _earliest(model, found, True, bundle, crashed, pool, judging)
    memory = crash_kind(finding) == MEMORY_FAULT
    if finding.symptom.startswith("signal ") and at_load:
        # a death at load may be a wrong static shape's consequence, as a refusal at load is:
        # 1.18.0's scalar Squeeze killed its optimizer with a SIGFPE on a OneHot of its Shape
        static = _static_shape(bundle, len(model.graph.node), pool, judging)
        if static is not None:
            return static
    if finding.kernel:  # a death already placed in the optimizer's pass (backends.death)
        return None
    if finding.symptom.startswith("signal ") and (finding.stage == "run" or memory):
        return _died_at(bundle, pool, judging.asking if memory else judging.asking.once())
    return None


def _first_wrong(bundle: Bundle, upto: int, pool: ClientPool, judging: Judging) -> Blame | None:
    """The first wrong tensor among those the first `upto` nodes make. Where the build says
    which tensors its optimized graph kept, only those are exposed, so the same fusions
    happen; where it does not (TVM), every tensor is, and the blame counts only if the
    model's own wrong outputs stay wrong in that run."""
    model, inputs = bundle.model, bundle.inputs
    with pool.lend() as client:
        first = client.run(model.SerializeToString(), inputs)
    dtypes = _tensor_types(model, inputs)
    if dtypes is None:
        return None
    tensors = [t for t in _kept_tensors(model, upto, first.kernels or None) if t in dtypes]
    if not tensors:
        return None
    probe = _probe(model, upto, tensors, dtypes)
    with pool.lend() as client:
        result = client.run(probe.SerializeToString(), inputs)
    if result.status is not Status.ok:
        return None
    j = judging.judge(judging.compute(probe, inputs), result)
    wrong = {o.name: o.mismatch.value for o in j.comparison.outputs if o.mismatch} if j.comparison else {}
    ends = {o.name for o in model.graph.output} if upto == len(model.graph.node) else set(wrong)
    tensor = next((t for t in tensors if t in wrong), None)
    if tensor is None or not (first.kernels or ends & set(wrong)):
        return None
    return Blame(wrong[tensor], _kernel(model, result.kernels, tensor), tensor)


def _through_body(found: Blame | None, bundle: Bundle, pool: ClientPool, judging: Judging) -> Blame | None:
    """`found`, or where the build ran its node as the op's function body (the kernel named
    is one of the body's, not the op's own), the body expanded in the model as the spec
    writes it: its first wrong tensor names the kernel; where the expansion runs right, the
    build's own expansion is the bug (FUNCTION_BODY); failing both, the node's op. onnxruntime
    1.17.3 loses `noop_with_empty_axes` in the float64 bodies of ReduceLogSum, ReduceL1 and
    ReduceL2 alike, which were named by each body's last node (`Log`, `ReduceSum`, `Cast`),
    the second a name of real ReduceSum defects."""
    if found is None:
        return None
    model = bundle.model
    index = next(i for i, n in enumerate(model.graph.node) if found.tensor in n.output)
    node = model.graph.node[index]
    own = f"{node.domain or 'ai.onnx'}::{node.op_type}"
    if found.kernel == own:  # the common case, asked of every blame: no reference traced for it
        return found
    types = _tensor_types(model, bundle.inputs) or {}
    ops = body_ops(model, node, types)
    if not ops or found.kernel.rsplit("::", 1)[-1] not in ops:
        return found
    expanded = expand(model, index, types)
    if expanded is None:
        return Blame(found.symptom, own, found.tensor)
    spelled = replace(bundle, model=expanded)
    inner = _first_wrong(spelled, len(expanded.graph.node), pool, judging)
    if inner is not None:
        return inner
    with pool.lend() as client:
        result = client.run(expanded.SerializeToString(), bundle.inputs)
    right = judging.judge(judging.compute(expanded, bundle.inputs), result).verdict is Verdict.pass_
    return Blame(found.symptom, FUNCTION_BODY if right else own, found.tensor)


def _earliest(
    model: onnx.ModelProto,
    found: Blame | None,
    ask: bool,
    bundle: Bundle,
    upto: int,
    pool: ClientPool,
    judging: Judging,
) -> Blame | None:
    """`found`, or a wrong static shape made before it (asked only where `ask`): the first in
    graph order names the bug."""
    static = _static_shape(bundle, upto, pool, judging) if ask else None
    if static is None or found is None:
        return static or found
    order = {t: i for i, n in enumerate(model.graph.node) for t in n.output}
    return static if order[static.tensor] < order[found.tensor] else found


def _static_shape(bundle: Bundle, upto: int, pool: ClientPool, judging: Judging) -> Blame | None:
    """The first tensor of the first `upto` nodes that the build computes right while its
    Shape is wrong: every tensor exposed, each with a Shape of it."""
    model, inputs = bundle.model, bundle.inputs
    dtypes = _tensor_types(model, inputs)
    if dtypes is None:
        return None
    tensors = [t for t in _kept_tensors(model, upto, None) if t in dtypes]
    if not tensors:
        return None
    probe = _probe(model, upto, tensors, dtypes, shapes=True)
    with pool.lend() as client:
        result = client.run(probe.SerializeToString(), inputs)
    if result.status is not Status.ok:
        # another consumer of the wrong shape refuses the cut too: the shape is made before it
        refused = _refused_at(bundle, pool, lambda j: j.verdict is Verdict.crash)
        return _static_shape(bundle, refused, pool, judging) if refused is not None and refused < upto else None
    j = judging.judge(judging.compute(probe, inputs), result)
    wrong = {o.name for o in j.comparison.outputs if o.mismatch} if j.comparison else set()
    tensor = next((t for t in tensors if t not in wrong and t + _SHAPE_OF in wrong), None)
    # the model's node: the build's inference ran on the graph as written, before any
    # rewrite renamed or removed what made the tensor
    return None if tensor is None else Blame(STATIC_SHAPE, _kernel(model, {}, tensor), tensor)


def _refused_at(bundle: Bundle, pool: ClientPool, refused: Callable[[Judgement], bool]) -> int | None:
    """The first node the build refuses the model at, the graph cut after each node in turn
    until a cut is `refused` (the finding's own failure, where its message names no node)."""
    dtypes = _tensor_types(bundle.model, bundle.inputs)
    if dtypes is None:
        return None
    for upto, node in enumerate(bundle.model.graph.node[:MAX_CUTS], start=1):
        made = [t for t in node.output if t in dtypes]
        if not made:
            continue
        cut = _probe(bundle.model, upto, made, dtypes).SerializeToString()
        with pool.lend() as client:
            j = judge(client.run(cut, dict(bundle.inputs)), {}, "")
        if refused(j):
            return upto - 1
    return None


def _died_at(bundle: Bundle, pool: ClientPool, asking: Asking) -> Blame | None:
    """The first node a death happens at: the graph cut after each node in turn, until a
    cut dies the same way, each cut asked as `asking` says (a few times for a memory
    fault). Memory corruption keeps the ops that shaped the heap in its reduced trigger (an
    Add, a Reciprocal before TVM 0.25's ScatterND on negative indices: three reports), while
    it dies in one kernel; it dies in some runs and not others, at any stage (glibc notices
    a heap it broke when it frees)."""
    finding = bundle.finding
    assert finding is not None
    model = bundle.model
    dtypes = _tensor_types(model, bundle.inputs)
    if dtypes is None:
        return None
    for upto, node in enumerate(model.graph.node, start=1):
        made = [t for t in node.output if t in dtypes]
        if not made:
            continue
        cut = _probe(model, upto, made, dtypes).SerializeToString()
        if asking.shown_once(partial(_dies_as, finding, cut, bundle.inputs, pool)):
            return Blame(crash_kind(finding), _kernel(model, {}, made[0]), made[0])
    return None


def _dies_as(finding: Judgement, cut: bytes, inputs: Mapping[str, np.ndarray], pool: ClientPool) -> bool:
    with pool.lend() as client:
        died = judge(client.run(cut, dict(inputs)), {}, "")
    return died.verdict is Verdict.crash and crash_kind(died) == crash_kind(finding)


def _tensor_types(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> dict[str, int] | None:
    """Every tensor's element type as the reference computes it (what a probe declares its
    exposed outputs as), or None when the reference cannot compute the model. A bfloat16
    tensor is left out: no build's binding gives it back as an output (UNFED_TYPES)."""
    trace = trace_reference(model, inputs)
    if trace.error is not None:
        return None
    types = {t: int(helper.np_dtype_to_tensor_dtype(as_numpy(v).dtype)) for t, v in trace.env.items()}
    return {t: elem for t, elem in types.items() if elem not in UNFED_TYPES}


def _kernel(model: onnx.ModelProto, kernels: Mapping[str, str], tensor: str) -> str:
    """The kernel that made `tensor`: the build's word for it, else the model's node."""
    producer = next(n for n in model.graph.node if tensor in n.output)
    return kernels.get(tensor) or f"{producer.domain or 'ai.onnx'}::{producer.op_type}"
