"""Re-typing a reduced trigger, and the names that follow from what its failure needs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bot.findings.bundle import DtypeEvidence
from bot.reduce.generalize import Outcome, dtype_evidence, generalized_name
from oracles.verdict import Judgement, Verdict
from reducers.candidate import Candidate
from reducers.retype import main_dtype, retype

pytestmark = [pytest.mark.worker]


def _fused(dtype: int = TensorProto.FLOAT) -> Candidate:
    """Sub(Mul(a, b), c) with c an initializer, then Cast back to the same type."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["p"]),
        helper.make_node("Sub", ["p", "c"], ["d"]),
        helper.make_node("Cast", ["d"], ["y"], to=dtype),
    ]
    c = numpy_helper.from_array(np.array([0.5, 1.5, 2.0]).astype(np_type), "c")
    ins = [helper.make_tensor_value_info(n, dtype, [3]) for n in "ab"]
    graph = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", dtype, [3])], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inputs = {"a": np.array([1.25, 2.0, 3.5]).astype(np_type), "b": np.array([2.0, 0.5, 1.0]).astype(np_type)}
    return Candidate(model, inputs)


def test_retype_moves_every_tensor_of_the_type_and_keeps_the_graph_checked() -> None:
    case = _fused()
    as_int = retype(case, TensorProto.FLOAT, TensorProto.INT32)
    assert as_int is not None and main_dtype(as_int.model) == TensorProto.INT32
    assert as_int.model.graph.initializer[0].data_type == TensorProto.INT32
    cast = next(n for n in as_int.model.graph.node if n.op_type == "Cast")
    assert cast.attribute[0].i == TensorProto.INT32
    assert {v.dtype for v in as_int.inputs.values()} == {np.dtype(np.int32)}
    # Floats become fresh small integers (converted, 1.25 -> 1 and 0.5 -> 0 would hide a bug by its values)
    again = retype(case, TensorProto.FLOAT, TensorProto.INT32)
    assert again is not None and all(np.array_equal(again.inputs[k], as_int.inputs[k]) for k in "ab")
    as_double = retype(case, TensorProto.FLOAT, TensorProto.DOUBLE)
    assert as_double is not None and np.array_equal(as_double.inputs["a"], case.inputs["a"].astype(np.float64))
    assert retype(case, TensorProto.FLOAT, TensorProto.BOOL) is None  # Mul and Sub take no bool


def test_value_variants_avoid_zero_divisors_and_differ() -> None:
    case = _fused(TensorProto.INT8)
    v1 = retype(case, TensorProto.INT8, TensorProto.UINT8, variant=1)
    v2 = retype(case, TensorProto.INT8, TensorProto.INT32, variant=2)
    assert v1 is not None and v2 is not None
    assert all((v > 0).all() for v in v1.inputs.values())
    assert not np.array_equal(v1.inputs["a"].astype(np.int64), v2.inputs["a"].astype(np.int64))


def test_a_type_passes_only_when_no_set_of_values_fails() -> None:
    """Ints fail only on the fresh positive draw (variant 1): still "fails". Floats pass on
    every draw: "passes". Bool is refused by the ops: no evidence."""

    def outcome(case: Candidate) -> Outcome:
        kind = next(iter(case.inputs.values())).dtype.kind
        if kind in "iu":
            return "fails" if (case.inputs["a"] > 0).all() else "passes"
        return "passes"

    found = _fused(TensorProto.INT64)
    found = Candidate(found.model, {**found.inputs, "a": np.array([0, 2, 3], np.int64)})  # passes as it is
    ev = dtype_evidence(found, outcome)
    assert ev is not None and ev.dtype == "int64"
    assert set(ev.fails) == {"int64", "int8", "uint8", "int32"}
    assert set(ev.passes) == {"float32", "float64", "float16"} and ev.untestable == ["bool"]
    assert ev.needs_dtype and ev.describe().startswith("fails at int64")


def test_names_keep_the_type_only_where_the_failure_needs_it() -> None:
    model = _fused(TensorProto.UINT8).model
    wrong = Judgement(verdict=Verdict.wrong_result, symptom="values", signature="values in Cast,Mul,Sub")
    anywhere = DtypeEvidence(dtype="uint8", fails=["uint8", "float16", "int64"], untestable=["bool"])
    at_float = _fused(TensorProto.FLOAT16).model
    sig, fp = generalized_name(model, wrong, "toycc", anywhere)
    sig16, fp16 = generalized_name(at_float, wrong, "toycc", anywhere.model_copy(update={"dtype": "float16"}))
    assert sig == sig16 == "values in Cast[T](Sub[T](Mul[T](in[T],in[T]),in[T])) (T: any)" and fp == fp16
    ints = DtypeEvidence(dtype="uint8", fails=["uint8", "int8"], passes=["float32"])
    sig_ints, fp_ints = generalized_name(model, wrong, "toycc", ints)
    assert sig_ints.endswith("(T: int8,uint8)") and fp_ints != fp
    crash = Judgement(verdict=Verdict.crash, symptom="exception", stage="run", signature="TypeError: bad uint8 input")
    crash16 = crash.model_copy(update={"signature": "TypeError: bad float16 input"})
    assert generalized_name(model, crash, "toycc", anywhere) == generalized_name(
        at_float, crash16, "toycc", anywhere.model_copy(update={"dtype": "float16"})
    )
    segv = Judgement(verdict=Verdict.crash, symptom="signal SIGSEGV", stage="run", signature="signal SIGSEGV")
    other = onnx.ModelProto()
    other.CopyFrom(model)
    other.graph.node[1].op_type = "Add"
    assert generalized_name(model, segv, "toycc", None) != generalized_name(other, segv, "toycc", None)


def _gather(dtype: int) -> Candidate:
    """GatherElements(data, indices) along axis 0, with data of `dtype`."""
    node = helper.make_node("GatherElements", ["data", "idx"], ["y"], axis=0)
    ins = [
        helper.make_tensor_value_info("data", dtype, [6, 4]),
        helper.make_tensor_value_info("idx", TensorProto.INT64, [2, 4]),
    ]
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", dtype, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = (np.arange(24).reshape(6, 4) % 3).astype(helper.tensor_dtype_to_np_dtype(dtype))
    return Candidate(model, {"data": data, "idx": np.array([[0, 5, 1, 2], [3, 4, 0, 1]], np.int64)})


def test_a_wrong_pick_is_not_named_by_the_types_whose_values_hid_it() -> None:
    """A backend that reads the row below the index for one cell (the shape of a real TVM
    0.25 GatherElements bug) is wrong wherever those two cells differ. Variant 4 makes every
    cell differ, so no type passes by its values alone; and bool, whose cells hold one bit,
    never counts as passing: the name is `(T: any)`."""

    def outcome(case: Candidate) -> Outcome:
        data = case.inputs["data"]
        if data.dtype == np.bool_:
            return "passes"  # as if every draw happened to agree
        return "fails" if data[5, 1] != data[4, 1] else "passes"

    for dtype in (TensorProto.INT8, TensorProto.UINT8, TensorProto.FLOAT16, TensorProto.INT64):
        distinct = retype(_gather(TensorProto.UINT8), TensorProto.UINT8, dtype, variant=4)
        assert distinct is not None and len(np.unique(distinct.inputs["data"])) == 24
    ev = dtype_evidence(_gather(TensorProto.UINT8), outcome)
    assert ev is not None and not ev.passes and ev.untestable == ["bool"], ev
    assert len(ev.fails) == 7 and not ev.needs_dtype


def test_a_trigger_found_at_a_wide_type_is_named_as_the_same_bug_met_at_a_classic_one() -> None:
    """An integer-only bug met at uint32 (a case that started wide) and at int32: the uint32
    trigger is tried at the same types as every trigger and named by them, so the two
    sightings are one report; a bug that only uint32 shows keeps uint32 in its name."""

    def ints_fail(case: Candidate) -> Outcome:
        return "fails" if next(iter(case.inputs.values())).dtype.kind in "iu" else "passes"

    wrong = Judgement(verdict=Verdict.wrong_result, symptom="values", signature="values in Cast,Mul,Sub")
    wide, classic = _fused(TensorProto.UINT32), _fused(TensorProto.INT32)
    ev_wide, ev_classic = dtype_evidence(wide, ints_fail), dtype_evidence(classic, ints_fail)
    assert ev_wide is not None and ev_classic is not None
    assert ev_wide.dtype == "uint32" and "uint32" in ev_wide.fails  # the report says where it was met
    name_wide = generalized_name(wide.model, wrong, "toycc", ev_wide)
    assert name_wide == generalized_name(classic.model, wrong, "toycc", ev_classic)
    assert name_wide[0].endswith("(T: int32,int64,int8,uint8)"), name_wide

    def only_uint32(case: Candidate) -> Outcome:
        return "fails" if next(iter(case.inputs.values())).dtype == np.uint32 else "passes"

    ev_own = dtype_evidence(wide, only_uint32)
    assert ev_own is not None and ev_own.fails == ["uint32"] and ev_own.needs_dtype
    assert generalized_name(wide.model, wrong, "toycc", ev_own)[0].endswith("(T: uint32)")
