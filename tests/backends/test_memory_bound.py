"""The bot's own memory bound (backends.memory): a computation on a case that asks for more
than the bound fails where it allocates and the case is dropped and counted, while backend
workers (whose system has its own cap) and the rest of the campaign carry on, and the
process's limit is put back after the campaign."""

from __future__ import annotations

import json
import resource
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from backends.client import WorkerClient
from backends.memory import OVER_BOUND, bounded, data_in_use, lift, out_of_memory, within_bound
from backends.results import Status
from backends.spec import parse_backend
from bot.findings.bundle import write_bundle
from oracles.references import Source, onnx_reference, read_reference
from tests.conftest import CliResult

GIB = 1 << 30


@pytest.fixture
def headroom() -> Iterator[int]:
    """768 MiB over what this test process holds (a long test session holds gigabytes)."""
    yield 768 * (1 << 20)


def filled(elements: int) -> onnx.ModelProto:
    """ConstantOfShape to `elements` float32 ones, summed: a small model whose computation
    asks for 4 x `elements` bytes at once."""
    shape = numpy_helper.from_array(np.array([elements], dtype=np.int64), "shape")
    nodes = [
        helper.make_node(
            "ConstantOfShape", ["shape"], ["big"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])
        ),
        helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0),
        helper.make_node("Add", ["y", "x"], ["z"]),
    ]
    graph = helper.make_graph(
        nodes,
        "filled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [])],
        initializer=[shape],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


X = {"x": np.array(0.5, dtype=np.float32)}


def test_the_bound_holds_inside_its_block_only_and_an_outer_one_stays_the_tighter(headroom: int) -> None:
    before = resource.getrlimit(resource.RLIMIT_DATA)
    held = data_in_use()
    with bounded(headroom) as bound:
        assert bound is not None and held + headroom <= bound < held + headroom + (64 << 20), (held, bound)
        assert resource.getrlimit(resource.RLIMIT_DATA)[0] == bound
        with bounded(headroom + GIB) as inner:
            assert inner == bound, "an inner, looser bound does not loosen the outer one"
        assert resource.getrlimit(resource.RLIMIT_DATA)[0] == bound
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
    with bounded(None) as none:
        assert none is None and resource.getrlimit(resource.RLIMIT_DATA) == before


def test_the_references_say_out_of_memory_and_never_no_reading(headroom: int) -> None:
    """Past the bound neither reference turns the failure into "could not compute" (a case
    judged without a reading); under it, both compute the same model."""
    big = filled(3 * GIB // 4)  # 3 GiB of float32
    with bounded(headroom), pytest.raises((MemoryError, RuntimeError)) as torch_side:
        read_reference(big, X)
    assert out_of_memory(torch_side.value), torch_side.value
    with bounded(headroom), pytest.raises(MemoryError):
        onnx_reference(big, X)
    small = filled(1000)
    with bounded(headroom):
        reading = read_reference(small, X)
        other, why = onnx_reference(small, X)
    assert reading.outputs is not None and float(reading.outputs["z"]) == 1000.5
    assert other is not None and float(other["z"]) == 1000.5, why


def never_ending_loop() -> onnx.ModelProto:
    """A while loop (no trip count) whose body hands its condition on unchanged, stacking a
    [64, 64] tensor per iteration: a reduction's candidate can be one (the body's own
    condition reduced away). onnx.reference runs it until memory runs out; a 60-second demo
    campaign was killed by the kernel at 23 GB."""
    state = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [64, 64]) for n in ("s", "s_out", "scan")]
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["s", "one"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["scan"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            state[0],
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), state[1], state[2]],
        initializer=[helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "go", "x"], ["final", "scans"], body=body)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        [
            helper.make_tensor_value_info("final", TensorProto.FLOAT, [64, 64]),
            helper.make_tensor_value_info("scans", TensorProto.FLOAT, None),
        ],
        initializer=[helper.make_tensor("go", TensorProto.BOOL, [], [True])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_loop_that_never_ends_has_no_reading_and_is_never_handed_to_onnx_reference(headroom: int) -> None:
    """The 23 GB: the torch reference stops the loop at its bound, and no other reference is
    asked instead (onnx.reference, asked before, ran past the bound here and past the
    machine in the campaign)."""
    with bounded(headroom):
        reading = read_reference(never_ending_loop(), {"x": np.zeros((64, 64), dtype=np.float32)})
    assert reading.outputs is None and reading.source is Source.none
    assert "has not stopped" in reading.gap and reading.gap_op == "Loop"
    assert "onnx.reference" not in reading.gap


def test_a_computation_past_the_bound_is_dropped_and_counted_and_other_errors_are_not(headroom: int) -> None:
    drops: list[str] = []

    def count() -> None:
        drops.append(OVER_BOUND)

    def fine() -> int:
        return int(torch.ones(1000).sum())

    def greedy() -> int:
        return int(torch.ones(GIB).sum())  # 4 GiB

    def broken() -> int:
        raise RuntimeError("a shape mismatch, not memory")

    with bounded(headroom):
        assert within_bound(fine, count) == 1000 and not drops
        assert within_bound(greedy, count) is None and drops == [OVER_BOUND]
        assert within_bound(fine, count) == 1000, "the process goes on after the drop"
        with pytest.raises(RuntimeError, match="shape mismatch"):
            within_bound(broken, count)
    assert drops == [OVER_BOUND]


@pytest.mark.worker
def test_a_worker_started_under_the_bound_lifts_it_for_the_system_under_test(headroom: int) -> None:
    """onnxruntime computes a tensor the bound would refuse the bot: its worker is the
    system's, capped by its own address-space limit, not by the bot's bound."""
    model = filled(GIB // 4)  # 1 GiB of float32
    with bounded(headroom), WorkerClient(parse_backend("onnxruntime"), timeout_s=60) as client:
        result = client.run(model.SerializeToString(), X)
    assert result.status is Status.ok, result.message
    assert result.outputs is not None and float(result.outputs["z"]) >= 2**24  # float32's sum of 2**28 ones


def test_lift_raises_the_soft_limit_to_the_hard_one() -> None:
    before = resource.getrlimit(resource.RLIMIT_DATA)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (data_in_use() + GIB, before[1]))
        lift()
        assert resource.getrlimit(resource.RLIMIT_DATA) == (before[1], before[1])
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, before)


@pytest.mark.worker
@pytest.mark.campaign
def test_a_campaign_skips_a_case_past_its_bound_finishes_and_puts_the_limit_back(
    cli: Callable[..., CliResult], tmp_path: Path, headroom: int, probe_cache: str
) -> None:
    """A regression-corpus bundle whose reference asks 3 GiB is skipped with the reason; the
    campaign replays the other, fuzzes, writes summary.json with the bound it held, and
    leaves the process's limit as it found it."""
    folder = tmp_path / "regressions"
    write_bundle(folder / "0000000000000b16", filled(3 * GIB // 4), X, None)
    write_bundle(folder / "000000000000000a", filled(1000), X, None)
    config = tmp_path / "fuzzbot.yml"
    config.write_text("memory: 768MiB\nbackend: onnxruntime\n")
    before = resource.getrlimit(resource.RLIMIT_DATA)
    out = tmp_path / "out"
    r = cli(
        "fuzz",
        "--config",
        str(config),
        "--regressions",
        str(folder),
        "--max-tests",
        "4",
        "--budget",
        "60s",
        "--nodes",
        "3",
        "--cache-dir",
        probe_cache,
        "--out",
        str(out),
    )
    assert r.code in (0, 2), r.err
    summary = json.loads((out / "summary.json").read_text())
    assert headroom < summary["memory_bound"] <= data_in_use() + headroom, summary["memory_bound"]
    replay = summary["regressions"]
    assert replay["replayed"] == 1 and list(replay["skipped"]) == ["0000000000000b16"], replay
    assert "memory" in replay["skipped"]["0000000000000b16"]
    assert summary["tests"] >= 4
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


def test_the_config_reads_sizes_and_null_and_names_a_bad_one(tmp_path: Path) -> None:
    from bot.config import ConfigError, load_config

    for text, want in (("4GiB", 4 * GIB), ("512MiB", 512 << 20), ("null", None), ("1073741824", GIB)):
        path = tmp_path / "c.yml"
        path.write_text(f"memory: {text}\n")
        assert load_config(path, {}).memory == want, text
    path.write_text("memory: lots\n")
    with pytest.raises(ConfigError, match=r"memory.*not a size"):
        load_config(path, {})


@pytest.mark.worker
def test_a_finding_whose_folding_asks_past_the_bound_stays_listed_and_the_rest_fold(
    tmp_path: Path, headroom: int
) -> None:
    """Folding blames each unreduced finding, which computes the reference of cut models in
    the bot's own process; the references re-raise past the bound (a case is dropped, never
    judged without a reading), and a campaign between onnxruntime 1.17.3 and 1.18.0 died
    there. The greedy finding stays listed, unreduced, and is counted; the next one is
    still asked about, and the process's limit is as it was."""
    from backends.results import BackendInfo
    from bot.config import FuzzConfig
    from bot.findings.bundle import Finding
    from bot.findings.kept import KeptFindings
    from bot.findings.store import FindingStore
    from bot.findings.summary import FindingRef
    from bot.reduce.campaign import CampaignReduction
    from bot.reduce.workers import SideRun
    from oracles.sides import CrossVerdict
    from oracles.verdict import Verdict

    out = tmp_path / "out"
    refs: list[FindingRef] = []
    for name, model in (("greedy", filled(GIB // 4)), ("small", filled(1000))):  # 1 GiB of float32, 4 KB
        finding = Finding(
            verdict=Verdict.wrong_result, backend=BackendInfo(name="onnxruntime", level="all", version="")
        )
        write_bundle(out / "findings" / name, model, X, None, finding)
        refs.append(
            FindingRef(
                path=f"findings/{name}",
                verdict=Verdict.wrong_result,
                across=CrossVerdict.persistent,
                fingerprint=name,
                seed=len(refs),
                signature="ConstantOfShape,ReduceSum,Add",
            )
        )
    kept = KeptFindings(list(refs))
    side = SideRun("onnxruntime", sys.executable, 60.0)
    reduction = CampaignReduction(
        FuzzConfig(backend="onnxruntime", out=str(out)), {"head": side}, kept, FindingStore.in_dir(out)
    )
    before = resource.getrlimit(resource.RLIMIT_DATA)
    try:
        with bounded(headroom):
            reduction.fold_unreduced()
    finally:
        reduction.close()
    assert reduction.over_bound == 1
    assert kept.findings == refs and all(r.reduced_path is None for r in refs)
    assert (out / "findings" / "greedy" / "model.onnx").is_file()
    assert resource.getrlimit(resource.RLIMIT_DATA) == before
