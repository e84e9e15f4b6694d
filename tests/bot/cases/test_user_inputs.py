"""Models a user hands over (`fuzzbot check`, `fuzzbot run`), on the real onnxruntime: inputs
that do not fit the model are the user's mistake, said in one line, never a verdict; inputs
fuzzbot draws are valid for the model; one bad file beside good ones stops nothing; and a
one-build verdict is named alike everywhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.conftest import CliResult

pytestmark = [pytest.mark.worker]

Cli = Callable[..., CliResult]


def _model(
    nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _relu(path: Path, dims: tuple[int, ...] = (2, 3)) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(dims))
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]), str(path))
    return path


def _tile(path: Path) -> Path:
    """Tile of a [3] tensor whose repeats are a graph input; the declared [15] output says 5."""
    nodes = [helper.make_node("Tile", ["x", "r"], ["y"])]
    ins = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
        helper.make_tensor_value_info("r", TensorProto.INT64, [1]),
    ]
    onnx.save(_model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [15])]), str(path))
    return path


def _one_error(r: CliResult, *needles: str) -> str:
    assert r.code == 1, (r.code, r.out, r.err)
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith("error:"), r.err
    assert "Traceback" not in r.err
    for needle in needles:
        assert needle in r.err_lines[0], r.err_lines[0]
    return r.err_lines[0]


@pytest.mark.parametrize(
    ("arrays", "needles"),
    [
        ({"x": np.zeros(3, np.float32)}, ("'x' is float32[3]", "declares float32[2,3]")),
        ({"x": np.zeros((2, 3), np.float64)}, ("'x' is float64[2,3]", "declares float32[2,3]")),
        ({"x": np.zeros((2, 4), np.float32)}, ("'x' is float32[2,4]", "declares float32[2,3]")),
        ({"x": np.zeros((2, 3), np.float32), "z": np.zeros(1)}, ("z name no input of the model", "its inputs: x")),
        ({"w": np.zeros((2, 3), np.float32)}, ("has no array for graph input(s) x",)),
    ],
    ids=["rank", "dtype", "dims", "extra", "missing"],
)
def test_inputs_that_do_not_fit_the_model_are_one_error_line_not_a_verdict(
    cli: Cli, tmp_path: Path, arrays: dict[str, np.ndarray], needles: tuple[str, ...]
) -> None:
    model = _relu(tmp_path / "model.onnx")
    np.savez(tmp_path / "model.npz", **arrays)  # type: ignore[arg-type]
    _one_error(cli("check", str(model)), "model.npz", *needles)
    _one_error(cli("run", str(model)), "model.npz", *needles)


def test_a_symbolic_dim_takes_any_size(cli: Cli, tmp_path: Path) -> None:
    model = _relu(tmp_path / "model.onnx", dims=(2, 3))
    m = onnx.load(str(model))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    m.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(m, str(model))
    np.savez(tmp_path / "model.npz", x=np.ones((5, 3), np.float32))
    r = cli("check", str(model))
    assert r.code == 0 and "model.onnx: pass" in r.out, r.err


def test_a_drawn_shape_operand_is_valid_for_the_model(cli: Cli, tmp_path: Path) -> None:
    """The repeats are read off the declared output ([15] from [3]: 5), never drawn as data."""
    r = cli("check", "--json", str(_tile(tmp_path / "tile.onnx")))
    assert r.code == 0, r.err
    [case] = json.loads(r.out)["cases"]
    assert case["verdict"] == "pass" and case["sides"]["head"]["status"] == "ok", case
    assert "r set for the Tile repeats" in case["inputs"] and "r set for the Tile repeats" in r.err


def test_drawn_indices_and_targets_stay_valid(cli: Cli, tmp_path: Path) -> None:
    """Gather's indices inside the axis, and a Reshape's target the model's own shape."""
    nodes = [
        helper.make_node("Gather", ["x", "i"], ["g"], axis=1),
        helper.make_node("Reshape", ["g", "s"], ["y"]),
    ]
    ins = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("i", TensorProto.INT64, [4]),
        helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
    ]
    onnx.save(
        _model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])]), str(tmp_path / "m.onnx")
    )
    r = cli("check", "--json", str(tmp_path / "m.onnx"))
    assert r.code == 0, r.err
    [case] = json.loads(r.out)["cases"]
    assert case["verdict"] == "pass", case
    assert "i set for the Gather indices" in case["inputs"] and "s set for the Reshape shape" in case["inputs"]


def test_a_shape_fuzzbot_cannot_draw_asks_for_the_inputs(cli: Cli, tmp_path: Path) -> None:
    """A Reshape target computed from an input by an Add: no value is read off the shapes,
    and the guess gives another output shape than the declared one."""
    nodes = [
        helper.make_node("Add", ["r", "one"], ["target"]),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    ins = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
        helper.make_tensor_value_info("r", TensorProto.INT64, [1]),
    ]
    model = _model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [12])])
    model.graph.initializer.append(helper.make_tensor("one", TensorProto.INT64, [1], [1]))
    onnx.save(model, str(tmp_path / "m.onnx"))
    _one_error(
        cli("check", str(tmp_path / "m.onnx")),
        "m.onnx: fuzzbot cannot draw valid values for r (the Reshape shape, through other ops)",
        "give the inputs as m.npz beside",
    )


def test_an_unsigned_16_bit_model_is_drawn_and_judged(cli: Cli, tmp_path: Path) -> None:
    """fuzzbot's generator has no uint16, but a user's model may: its values are drawn too."""
    x = helper.make_tensor_value_info("x", TensorProto.UINT16, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.UINT16, [2, 3])
    onnx.save(_model([helper.make_node("Add", ["x", "x"], ["y"])], [x], [y]), str(tmp_path / "u16.onnx"))
    r = cli("check", str(tmp_path / "u16.onnx"))
    assert r.code == 0 and "u16.onnx: pass" in r.out, r.err


def test_a_type_fuzzbot_cannot_draw_says_the_limit_is_fuzzbots(cli: Cli, tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])
    onnx.save(_model([helper.make_node("Identity", ["x"], ["y"])], [x], [y]), str(tmp_path / "c.onnx"))
    _one_error(
        cli("check", str(tmp_path / "c.onnx")), "fuzzbot does not yet draw or judge COMPLEX64 tensors (input 'x')"
    )


def test_one_corrupt_model_in_a_folder_does_not_stop_the_others(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    _relu(folder / "a.onnx")
    (folder / "b.onnx").write_bytes(b"\x08\x07garbage\xff")
    _tile(folder / "c.onnx")
    r = cli("check", str(folder))
    assert r.code == 1, r.err
    assert [line for line in r.err_lines if line.startswith("error:")] == [
        next(line for line in r.err_lines if "b.onnx" in line)
    ]
    assert f"{folder / 'a.onnx'}: pass" in r.out and f"{folder / 'c.onnx'}: pass" in r.out
    report = json.loads(cli("check", "--json", str(folder)).out)
    assert [c["model"] for c in report["cases"]] == [str(folder / "a.onnx"), str(folder / "c.onnx")]
    assert [u["model"] for u in report["unreadable"]] == [str(folder / "b.onnx")]
    assert "not a readable ONNX model" in report["unreadable"][0]["error"]


def test_a_one_build_finding_is_named_by_its_verdict_everywhere(cli: Cli, tmp_path: Path) -> None:
    """With one build there is nothing to compare: a wrong result is `wrong_result` in the
    text, in --json's verdict, in the counts and in summary.md, never `persistent`."""
    model = _relu(tmp_path / "model.onnx")
    np.savez(tmp_path / "model.npz", x=np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    config = tmp_path / "fuzzbot.yml"
    config.write_text("test_fault: {kind: perturb}\n")
    out = tmp_path / "out"
    r = cli("check", "--config", str(config), "--out", str(out), str(model))
    assert r.code == 2, r.err
    assert r.out.strip() == f"{model}: wrong_result"
    report = json.loads(cli("check", "--config", str(config), "--json", str(model)).out)
    assert report["cases"][0]["verdict"] == "wrong_result" and report["counts"] == {"wrong_result": 1}
    assert "persistent" not in (out / "summary.md").read_text()


def _random_model(path: Path) -> onnx.ModelProto:
    """y draws from RandomUniformLike; z is the input negated, computed without it."""
    nodes = [
        helper.make_node("RandomUniformLike", ["x"], ["r"]),
        helper.make_node("Add", ["r", "x"], ["y"]),
        helper.make_node("Neg", ["x"], ["z"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("y", "z")]
    model = _model(nodes, [x], outs)
    onnx.save(model, str(path))
    return model


def test_values_drawn_by_a_random_op_are_never_a_wrong_result(cli: Cli, tmp_path: Path) -> None:
    """RandomUniformLike's values are the build's own draw: onnxruntime's, judged against
    onnx.reference's draw, were reported as a wrong result. An output computed without the
    random op is still judged by value."""
    from backends.results import RunResult, Status
    from oracles.case import CaseEvidence
    from oracles.verdict import Verdict

    model = _random_model(tmp_path / "random.onnx")
    r = cli("check", str(tmp_path / "random.onnx"), "--json")
    assert r.code == 0, r.err
    (found,) = json.loads(r.out)["cases"]
    assert found["verdict"] == "pass", found

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    evidence = CaseEvidence.compute(model, {"x": x})
    assert evidence.random == {"y"}
    noise = np.full((2, 3), 7.0, np.float32)
    assert evidence.judge(RunResult(status=Status.ok, outputs={"y": noise, "z": -x})).verdict is Verdict.pass_
    wrong = evidence.judge(RunResult(status=Status.ok, outputs={"y": noise, "z": x}))
    assert wrong.verdict is Verdict.wrong_result and wrong.comparison is not None
    assert [o.name for o in wrong.comparison.outputs if o.mismatch] == ["z"]


def test_a_nan_the_user_feeds_into_topk_is_an_undefined_input(cli: Cli, tmp_path: Path) -> None:
    """TopK's spec orders values and says nothing of NaN: where a build puts it among the k
    best is its own, and onnxruntime's differed from the reference's. Not a wrong result;
    the same model on NaN-free inputs is judged by value."""
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    outs = [
        helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 2]),
        helper.make_tensor_value_info("i", TensorProto.INT64, [2, 2]),
    ]
    graph = helper.make_graph([node], "g", [x], outs, [helper.make_tensor("k", TensorProto.INT64, [1], [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(tmp_path / "topk.onnx"))
    np.savez(tmp_path / "topk.npz", x=np.array([[1, np.nan, 3, 2], [np.nan, 5, 0, 1]], dtype=np.float32))
    r = cli("check", str(tmp_path / "topk.onnx"), "--json")
    assert r.code == 0, r.err
    (found,) = json.loads(r.out)["cases"]
    assert found["verdict"] == "pass" and "not 'x has no NaN' in 2 element(s)" in found["sides"]["head"]["message"]

    from oracles.undefined import undefined_inputs

    assert undefined_inputs(model, {"x": np.array([[1, 4, 3, 2], [7, 5, 0, 1]], dtype=np.float32)}) == []
    assert undefined_inputs(model, {"x": np.array([[1, np.inf, 3, 2], [7, 5, 0, 1]], dtype=np.float32)}) == []


def test_run_and_check_name_a_crash_on_an_undefined_input_alike(cli: Cli, tmp_path: Path) -> None:
    """TVM 0.27 dies of SIGFPE on an int32 division by zero. The input is undefined, so the
    death is counted as `crash_on_undefined_input`, not a finding: `fuzzbot run` said
    `crash` and exited 2 where `fuzzbot check` said otherwise."""
    nodes = [helper.make_node("Div", ["a", "b"], ["y"])]
    ins = [helper.make_tensor_value_info(n, TensorProto.INT32, [4]) for n in ("a", "b")]
    y = helper.make_tensor_value_info("y", TensorProto.INT32, [4])
    onnx.save(_model(nodes, ins, [y]), str(tmp_path / "div.onnx"))
    np.savez(tmp_path / "div.npz", a=np.array([1, 2, 3, 4], np.int32), b=np.array([1, 0, 3, 0], np.int32))
    r = cli("run", str(tmp_path / "div.onnx"), "--backend", "tvm", "--json")
    assert r.code == 0, r.err
    (row,) = json.loads(r.out)["results"]
    assert row["status"] == "crash" and row["verdict"] == "crash_on_undefined_input" and not row["reported"], row
    (tmp_path / "fuzzbot.yml").write_text("backend: tvm\n")
    r = cli("check", str(tmp_path / "div.onnx"), "--config", str(tmp_path / "fuzzbot.yml"), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["cases"][0]["verdict"] == row["verdict"]


def test_check_says_which_level_it_asked_of_a_build_that_declares_several(cli: Cli, tmp_path: Path) -> None:
    """A bug that needs another configuration passes at the one asked (two TVM bugs need
    FoldConstant first): the answer says it asked one, and which others the build runs."""
    _relu(tmp_path / "relu.onnx")
    r = cli("check", str(tmp_path / "relu.onnx"), "--json")
    assert r.code == 0, r.err
    levels = json.loads(r.out)["levels"]
    assert levels["asked"] == ["all"] and {"all", "disable", "basic"} <= set(levels["declared"]), levels
    others = ", ".join(lv for lv in levels["declared"] if lv != "all")
    note = f"note: judged at onnxruntime:all only; the build also runs at {others}, and a bug that needs one of"
    assert any(line.startswith(note) for line in r.err_lines), r.err
