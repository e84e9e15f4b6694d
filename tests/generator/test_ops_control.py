"""Loop, Scan and If with generated subgraphs: valid, computed right by the reference (and by
the float64 re-run, through the bodies), and run the same by the real onnxruntime."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import Status
from backends.spec import parse_backend
from bot.findings.bundle import Finding, load_bundle, write_bundle
from generator.api import GenConfig, GeneratedCase, generate
from generator.ops.base import captured_names
from generator.ops.control import Loop, Scan
from generator.values.interp import Program
from oracles.compare import compare
from oracles.references import float64_reference, onnx_reference
from oracles.signature import op_signature
from oracles.verdict import Verdict, judge
from reducers import passes, subgraphs
from reducers.candidate import Candidate
from reducers.passes import Context
from reducers.tester import ReduceConfig
from reducers.tester import Tester as CandidateTester
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker]

Cli = Callable[..., CliResult]

CONTROL = ("Loop", "Scan", "If")


def _cases(op: str, count: int, seeds: int = 80) -> list[GeneratedCase]:
    """Generated models with at least one `op` node, over the float types."""
    found = []
    for seed in range(seeds):
        case = generate(seed, GenConfig(nodes=3, ops=[op, "Add", "Relu"], dtypes=["float32", "float64", "float16"]))
        if any(n.op_type == op for n in case.model.graph.node):
            found.append(case)
        if len(found) == count:
            break
    assert len(found) == count, f"only {len(found)} {op} cases in {seeds} seeds"
    return found


@pytest.fixture(scope="module")
def ort() -> Iterator[WorkerClient]:
    with WorkerClient(parse_backend("onnxruntime:all"), timeout_s=60) as client:
        yield client


@pytest.mark.parametrize("op", CONTROL)
def test_generated_control_flow_is_valid_and_runs_right_on_onnxruntime(op: str, ort: WorkerClient) -> None:
    for case in _cases(op, 8):
        inferred = onnx.shape_inference.infer_shapes(case.model, strict_mode=True)
        onnx.checker.check_model(inferred, full_check=True)
        reference = run_reference(case.model, case.inputs)
        result = ort.run(case.model.SerializeToString(), case.inputs)
        assert result.status is Status.ok, result.message
        j = judge(result, reference, op_signature(case.model))
        assert j.verdict is Verdict.pass_, (case.seed, j.message)
        wide = float64_reference(case.model, case.inputs)
        assert wide is not None, "the float64 re-run computes through the subgraphs"
        assert compare(reference, {k: v.astype(reference[k].dtype) for k, v in wide.items()}).ok or any(
            v.dtype == np.float16 for v in reference.values()
        )


def test_onnx_reference_agrees_on_the_forms_it_computes() -> None:
    """onnx.reference scans only along axis 0, forward, and stacks a Loop's outputs of
    rank 2 or more by concatenation; where it computes the form, it agrees."""
    agreed = 0
    for op in CONTROL:
        for case in _cases(op, 8):
            second, _ = onnx_reference(case.model, case.inputs)
            if second is None:
                continue
            reference = run_reference(case.model, case.inputs)
            if any(second[k].shape != reference[k].shape for k in reference):
                continue
            assert compare(reference, second).ok, (op, case.seed)
            agreed += 1
    assert agreed >= 8


def _first(op: str, wanted: dict[str, object]) -> GeneratedCase:
    for case in _cases(op, 20, seeds=400):
        node = next(n for n in case.model.graph.node if n.op_type == op)
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if all(attrs.get(k) == v for k, v in wanted.items()):
            return case
    raise AssertionError(f"no {op} with {wanted}")


def test_a_wrong_reading_of_a_reversed_scan_is_caught(ort: WorkerClient, monkeypatch: pytest.MonkeyPatch) -> None:
    case = _first("Scan", {"scan_input_directions": [1]})
    result = ort.run(case.model.SerializeToString(), case.inputs)
    right = run_reference(case.model, case.inputs)
    assert judge(result, right, "").verdict is Verdict.pass_
    forward = Scan.reference

    def ignores_direction(attrs: dict[str, object], inputs: list[object]) -> object:
        return forward({k: v for k, v in attrs.items() if k != "scan_input_directions"}, inputs)  # type: ignore[arg-type]

    monkeypatch.setattr(Scan, "reference", staticmethod(ignores_direction))
    assert judge(result, run_reference(case.model, case.inputs), "").verdict is Verdict.wrong_result


def test_a_loop_that_stops_early_has_as_many_outputs_as_iterations_run(ort: WorkerClient) -> None:
    """The body's condition `iteration < K` stops the loop after K + 1 iterations, fewer than
    its trip count: the stacked output's length is known only at run time."""
    for case in _cases("Loop", 30, seeds=600):
        node = next(n for n in case.model.graph.node if n.op_type == "Loop")
        body = next(a.g for a in node.attribute if a.name == "body")
        less = [n for n in body.node if n.op_type == "Less"]
        if not less or len(node.output) < 2:
            continue
        k = int(next(a.t for n in body.node if n.op_type == "Constant" for a in n.attribute).int64_data[0])
        result = ort.run(case.model.SerializeToString(), case.inputs)
        reference = run_reference(case.model, case.inputs)
        assert reference[node.output[1]].shape[0] == k + 1
        assert result.outputs[node.output[1]].shape[0] == k + 1
        return
    raise AssertionError("no Loop stopping early with a stacked output")


def test_a_branch_reads_outer_tensors_and_the_value_search_sees_through_it() -> None:
    case = _cases("If", 1)[0]
    node = next(n for n in case.model.graph.node if n.op_type == "If")
    outer = captured_names(node)
    assert outer and not set(outer) & set(node.input), "the branches read what the node does not list"
    free = [v.name for v in case.model.graph.input if v.name in case.inputs and not v.name.startswith("r")]
    program = Program(case.model, case.inputs, free)
    assert program.ancestors[node.output[0]] & set(free), "a walk back from the If reaches the graph inputs"


def test_a_loop_reads_nothing_from_outside_and_its_body_is_refused_if_it_does() -> None:
    case = _cases("Loop", 1)[0]
    node = next(n for n in case.model.graph.node if n.op_type == "Loop")
    assert captured_names(node) == ()
    body = next(a.g for a in node.attribute if a.name == "body")
    body.node[0].input[0] = "not_in_scope"
    with pytest.raises(NotImplementedError, match="outer scope"):
        Loop.reference({"body": body}, [None, None, *(np.zeros(1) for _ in body.input[2:])])  # type: ignore[list-item]


def test_a_crash_that_does_not_need_the_if_reduces_to_a_straight_line(cli: Cli, tmp_path: Path) -> None:
    """An injected segfault on every model: the reduced model keeps no If, its branch inlined."""
    case = _cases("If", 1)[0]
    with WorkerClient(parse_backend("onnxruntime:all"), fault={"kind": "segv", "every": 1}) as client:
        result = client.run(case.model.SerializeToString(), case.inputs)
    reference = run_reference(case.model, case.inputs)
    j = judge(result, reference, op_signature(case.model))
    assert j.verdict is Verdict.crash and result.backend is not None
    bundle = write_bundle(
        tmp_path / "crash", case.model, case.inputs, reference, Finding(**dict(j), backend=result.backend)
    )
    r = cli("reduce", str(bundle), "--test-fault", "segv", "--budget", "60s", "--out", str(tmp_path / "small"))
    assert r.code == 0, r.err
    small = load_bundle(tmp_path / "small")
    assert [n.op_type for n in small.model.graph.node if n.op_type == "If"] == []
    assert len(small.model.graph.node) == 1


def _loop_runs_right(case: Candidate) -> bool:
    """The model has a Loop, and onnxruntime computes every output at its declared shape
    with the reference's values: a trimmed Loop must stay a valid model, not just a smaller one."""
    if not any(n.op_type == "Loop" for n in case.model.graph.node):
        return False
    try:
        with WorkerClient(parse_backend("onnxruntime:disable"), timeout_s=60) as client:
            result = client.run(case.model.SerializeToString(), case.inputs)
        reference = run_reference(case.model, case.inputs)
    except Exception:  # noqa: BLE001 - any refusal means "not this bug"
        return False
    if result.status is not Status.ok:
        return False
    for out in case.model.graph.output:
        got = result.outputs[out.name].shape
        declared = out.type.tensor_type.shape.dim
        if len(got) != len(declared) or any(d.dim_value not in (0, n) for d, n in zip(declared, got, strict=True)):
            return False
        if not np.allclose(result.outputs[out.name], reference[out.name], rtol=1e-3, atol=1e-3):
            return False
    return True


def test_a_loop_is_trimmed_to_one_iteration_when_the_bug_needs_no_more() -> None:
    cases = [
        c
        for c in (generate(seed, GenConfig(nodes=2, ops=["Loop", "Relu"], dtypes=["float32"])) for seed in range(120))
        if [n.op_type for n in c.model.graph.node].count("Loop") == 1
    ]
    trimmed: list[tuple[bool, bool]] = []
    for generated in cases:
        case = Candidate(generated.model, dict(generated.inputs))
        (loop,) = [n for n in case.model.graph.node if n.op_type == "Loop"]
        before, stop = subgraphs._int_value(case, loop.input[0]), subgraphs._early_stop(loop)
        if before is None or min(before, stop[1] + 1 if stop else before) < 2 or not _loop_runs_right(case):
            continue  # one iteration already, or a model onnxruntime already gets wrong
        small = passes.trim_loops(case, Context(CandidateTester(_loop_runs_right, Candidate.key, ReduceConfig())))
        assert small is not None and _loop_runs_right(small)
        (after,) = [n for n in small.model.graph.node if n.op_type == "Loop"]
        now = subgraphs._early_stop(after)
        runs = min(subgraphs._int_value(small, after.input[0]) or 0, now[1] + 1 if now else 1 << 30)
        assert runs == 1, (before, stop)
        trimmed.append((loop.input[0] in case.inputs, subgraphs._early_stop(loop) is not None))
    assert {runtime for runtime, _ in trimmed} == {True, False}, trimmed  # a trip count constant, and fed
    assert {early for _, early in trimmed} == {True, False}, trimmed  # with an early stop, and without
