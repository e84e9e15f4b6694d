"""The configurations users run, as levels: TVM's preparations before the default
pipeline, onnxruntime's parallel executor, torch.compile's dynamic shapes, each on the real
system; and a campaign's draw among them (bot.campaign.levels)."""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from backends.client import WorkerClient
from backends.reference import run_reference
from backends.results import Status
from backends.spec import adapter_class, parse_backend
from bot.campaign.levels import case_level
from bot.cases.regression_corpus import _stored_level
from bot.config import ConfigError, load_config
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.campaign]


def _conv_norm_model() -> tuple[bytes, dict[str, np.ndarray], np.ndarray]:
    """Conv, BatchNormalization, then two branches (Relu, LayerNormalization) joined by an
    Add: what `inference` decomposes and folds, `nhwc` re-lays out, `parallel` runs at once.
    Returns the model, its input and the float64 answer worked out here with numpy."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    scale, bias = (1.0 + rng.random(4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    mean, var = rng.standard_normal(4).astype(np.float32), (0.5 + rng.random(4)).astype(np.float32)
    ln_scale, ln_bias = (1.0 + rng.random(6)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    inits = [
        numpy_helper.from_array(a, n)
        for a, n in [(w, "w"), (b, "b"), (scale, "s"), (bias, "o"), (mean, "m"), (var, "v")]
    ] + [numpy_helper.from_array(ln_scale, "ls"), numpy_helper.from_array(ln_bias, "lb")]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"], epsilon=1e-3),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("LayerNormalization", ["n", "ls", "lb"], ["l"], axis=-1),
        helper.make_node("Add", ["r", "l"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "levels",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 5, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)

    xd = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((2, 4, 5, 6))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", xd[:, :, i : i + 5, j : j + 6], w[:, :, i, j].astype(np.float64))
    conv += b[None, :, None, None]
    per = lambda a: a.astype(np.float64)[None, :, None, None]  # noqa: E731
    n = (conv - per(mean)) / np.sqrt(per(var) + np.float64(np.float32(1e-3))) * per(scale) + per(bias)
    centred = n - n.mean(axis=-1, keepdims=True)
    ln = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + np.float64(np.float32(1e-5)))
    y = np.maximum(n, 0) + ln * ln_scale + ln_bias
    return model.SerializeToString(), {"x": x}, y


@pytest.mark.parametrize(
    "backend", ["tvm:fold", "tvm:inference", "tvm:nhwc", "onnxruntime:parallel", "torch.compile:dynamic"]
)
def test_each_configuration_compiles_and_computes_the_model_right(backend: str) -> None:
    model, inputs, expected = _conv_norm_model()
    with WorkerClient(parse_backend(backend), timeout_s=300, compile_timeout_s=600) as client:
        result = client.run(model, inputs)
    assert result.status is Status.ok, result.message
    assert result.backend is not None and result.backend.level == backend.rsplit(":", 1)[1]
    np.testing.assert_allclose(result.outputs["y"], expected, rtol=1e-4, atol=1e-4)


def test_tvm_levels_run_their_passes_before_the_default_pipeline() -> None:
    """Each level's module differs from `default`'s where its passes act: the BatchNorm
    decomposed and folded, the conv re-laid out."""
    from backends.adapters.tvm import TvmAdapter

    model, _, _ = _conv_norm_model()
    adapter = TvmAdapter({})
    mod, _, _ = adapter.convert(model)
    text = {}
    for level, passes in TvmAdapter.PREPARATIONS.items():
        prepared = mod
        for name, args in passes:
            prepared = getattr(adapter.relax.transform, name)(*args)(prepared)
        text[level] = prepared.script()
    assert "R.nn.batch_norm" in mod.script() and "R.nn.batch_norm" not in text["inference"]
    assert 'data_layout="NHWC"' in text["nhwc"] and 'data_layout="NHWC"' not in mod.script()
    assert "R.nn.batch_norm" in text["fold"]  # fold alone keeps the op: its input is no constant


@pytest.mark.parametrize("backend", ["tvm:fold", "tvm:nhwc", "onnxruntime:parallel"])
def test_a_levels_repro_snippet_sets_up_the_same_configuration(backend: str) -> None:
    spec = parse_backend(backend)
    snippet = adapter_class(spec.adapter).repro_snippet(spec.level)
    if spec.name == "tvm":
        for name, args in adapter_class(spec.adapter).PREPARATIONS[spec.level]:
            assert f"relax.transform.{name}({', '.join(map(repr, args))})(mod)" in snippet
    else:
        assert "ExecutionMode.ORT_PARALLEL" in snippet and "inter_op_num_threads" in snippet
    namespace: dict[str, object] = {}
    exec(compile(textwrap.dedent(snippet), "<repro>", "exec"), namespace)
    model, inputs, expected = _conv_norm_model()
    run = namespace["run"]
    assert callable(run)
    np.testing.assert_allclose(run(model, inputs)["y"], expected, rtol=1e-4, atol=1e-4)


def test_a_cases_level_depends_on_its_seed_alone() -> None:
    levels = ["default", "fold", "inference"]
    drawn = [case_level(seed, levels) for seed in range(3000)]
    assert drawn == [case_level(seed, list(levels)) for seed in range(3000)]  # no state between draws
    counts = Counter(drawn)
    assert set(counts) == set(levels) and min(counts.values()) > 850, counts
    assert case_level(4, []) is None and case_level(4, ["fold"]) == "fold"


def test_the_config_spells_levels_the_builds_way_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    cfg = load_config(None, {"backend": "tvm", "levels": ["Default", "FOLD", "fold"]})
    assert cfg.levels == ["default", "fold"]
    with pytest.raises(ConfigError, match=r"^--levels fast: .*unknown level 'fast' for tvm; valid levels: O0, default"):
        load_config(None, {"backend": "tvm", "levels": ["fast"]})
    with pytest.raises(ConfigError, match=r"^--backend tvmm: "):  # a wrong backend is said once, by itself
        load_config(None, {"backend": "tvmm", "levels": ["fold"]})


def test_the_fuzz_flag_refuses_an_unknown_level_in_one_line(cli: Callable[..., CliResult], tmp_path: Path) -> None:
    r = cli("fuzz", "--backend", "onnxruntime", "--levels", "all,turbo", "--out", str(tmp_path / "out"))
    assert r.code == 1 and len(r.err_lines) == 1 and "Traceback" not in r.err
    assert "unknown level 'turbo' for onnxruntime" in r.err and "parallel" in r.err
    assert not (tmp_path / "out").exists()


def test_a_stored_bundles_level_is_read_from_its_spec(tmp_path: Path) -> None:
    cases: list[tuple[str, str | None]] = [("tvm:fold", "fold"), ("onnxruntime:parallel,threads=2", "parallel")]
    cases += [("tvm", "default")]
    plugin = "examples/plugin_backend.py:OnnxReferenceAdapter"  # its level is the handshake's
    cases += [(plugin, None), (f"{plugin}:checked", "checked"), ("missing_plugin.py:Adapter", None)]
    for n, (spec, level) in enumerate(cases):
        bundle = tmp_path / f"bundle{n}"
        bundle.mkdir()
        (bundle / "finding.json").write_text(f'{{"spec": "{spec}"}}')
        assert _stored_level(bundle) == level
    assert _stored_level(tmp_path / "missing") is None


def _model(
    nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], inits: list[onnx.TensorProto], shape: list[int]
) -> bytes:
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    model = helper.make_model(helper.make_graph(nodes, "bug", inputs, [out], inits), ir_version=8)
    model.opset_import[0].version = 17
    onnx.checker.check_model(model, full_check=True)
    return bytes(model.SerializeToString())


def _runtime_slice() -> tuple[bytes, dict[str, np.ndarray]]:
    """A Slice whose starts are a graph input: FoldConstant legalizes the dynamic strided
    slice although it is no constant, leaves the bindings of its shape function in the block
    and drops the function (`no definition of I.GlobalVar("shape_func")`, 0.26 and 0.27; 0.25
    fails on it too, at a Downcast from DataflowVar to ShapeExpr)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])
    starts = helper.make_tensor_value_info("starts", TensorProto.INT64, [1])
    inits = [numpy_helper.from_array(np.array([4], np.int64), "ends"), numpy_helper.from_array(np.array([1]), "axes")]
    model = _model([helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"])], [x, starts], inits, [4, 3])
    return model, {"x": np.arange(24, dtype=np.float32).reshape(4, 6), "starts": np.array([1], np.int64)}


def _variadic_max() -> tuple[bytes, dict[str, np.ndarray]]:
    """Max of three: the frontend stacks them and reduces; ConvertLayout names the stacked
    axis `S`, which the reduction's layout then cannot find (`Invalid SLayout`, 0.25-0.27).
    No conv2d in the model at all: ConvertLayout infers a layout for every op."""
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [4, 6]) for n in "abc"]
    rng = np.random.default_rng(0)
    return _model([helper.make_node("Max", ["a", "b", "c"], ["y"])], ins, [], [4, 6]), {
        n: rng.standard_normal((4, 6)).astype(np.float32) for n in "abc"
    }


@pytest.mark.parametrize(
    ("make", "levels"), [(_runtime_slice, ["fold", "inference"]), (_variadic_max, ["nhwc"])], ids=["slice", "max"]
)
def test_real_tvm_bugs_that_only_a_configuration_users_run_shows(
    make: Callable[[], tuple[bytes, dict[str, np.ndarray]]], levels: list[str]
) -> None:
    """Found by a hunt over 1,151 generated models at every level: 9 TVM bugs crash the build
    at fold, inference or nhwc on models `default` runs right (tests/bot/campaign/test_levels.py pins two;
    the note of the issue lists all nine with their release ranges)."""
    from oracles.verdict import Verdict, judge

    model, inputs = make()
    reference = {"y": np.asarray(run_reference(onnx.load_from_string(model), inputs)["y"])}
    with WorkerClient(parse_backend("tvm:default"), timeout_s=120) as client:
        fine = client.run(model, inputs)
    assert fine.status is Status.ok and np.allclose(fine.outputs["y"], reference["y"])
    for level in levels:
        with WorkerClient(parse_backend(f"tvm:{level}"), timeout_s=120) as client:
            result = client.run(model, inputs)
        assert result.status is Status.error and result.stage == "compile", (level, result.status, result.message)
        assert judge(result, reference, "").verdict is Verdict.crash  # a bug, not a declared limitation


def test_a_tvm_build_without_a_levels_pass_declines_the_level(monkeypatch: pytest.MonkeyPatch) -> None:
    """A nightly that dropped or renamed a pass: the level is a declared limitation there, not
    a crash of every model."""
    from backends.adapters.base import is_unsupported
    from backends.adapters.tvm import TvmAdapter

    adapter = TvmAdapter({})
    model, _, _ = _conv_norm_model()
    monkeypatch.delattr(adapter.relax.transform, "ConvertLayout")
    with pytest.raises(NotImplementedError) as raised:
        adapter.compile(adapter.convert(model), "nhwc")
    assert is_unsupported(TvmAdapter.unsupported, str(raised.value))
