"""`fuzzbot reduce` end to end: an external --check command, bad input, and the reduction
of a real onnxruntime wrong-result finding to a bundle whose repro still fails."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from backends.client import WorkerClient
from backends.faults import FaultSpec
from backends.reference import ReferenceError, run_reference
from backends.spec import parse_backend
from bench.reduce import plant
from bot.findings.bundle import Finding, load_bundle, write_bundle
from bot.findings.repro import render_repro
from generator.api import GenConfig, generate
from generator.dtypes import DType
from oracles.judging import Judging
from oracles.signature import op_signature
from oracles.tolerances import ToleranceConfig
from oracles.verdict import Verdict, judge
from tests import release_cases as rc
from tests.backends.test_memory_bound import GIB, X, filled
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.release]

Cli = Callable[..., CliResult]

PAIR_CHECK = """
import sys
import onnx
m = onnx.load(sys.argv[1])
made = {o: n.op_type for n in m.graph.node for o in n.output}
sys.exit(1 if any(n.op_type == "Softsign" and made.get(i) == "Sigmoid" for n in m.graph.node for i in n.input) else 0)
"""


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    for seed in range(19, 60):
        m = plant(generate(seed, GenConfig(nodes=12, values="none")).model, "pair")
        if m is not None:
            path = tmp_path / "model.onnx"
            onnx.save(m, str(path))
            return path
    raise AssertionError("no model took the trigger")


def _check(tmp_path: Path) -> str:
    script = tmp_path / "check.py"
    script.write_text(PAIR_CHECK)
    return f"{sys.executable} {script} {{model}}"


def test_external_check_reduces_to_the_op_pair(cli: Cli, tmp_path: Path, planted: Path) -> None:
    out = tmp_path / "out.onnx"
    r = cli("reduce", str(planted), "--check", _check(tmp_path), "--out", str(out), "--jobs", "2")
    assert r.code == 0, r.err
    reduced = onnx.load(str(out))
    assert [n.op_type for n in reduced.graph.node] == ["Sigmoid", "Softsign"]
    assert "Softsign" in out.with_suffix(".txt").read_text()
    assert f"reduced {len(onnx.load(str(planted)).graph.node)} -> 2 nodes" in r.err


BRITTLE_CHECK = """
import sys
import onnx
m = onnx.load(sys.argv[1])
ops = [n.op_type for n in m.graph.node]
if "Sigmoid" not in ops:
    sys.exit(1)  # the check's own assumption breaks (it needs a Sigmoid to look at): not the bug
made = {o: n.op_type for n in m.graph.node for o in n.output}
bug = any(n.op_type == "Softsign" and made.get(i) == "Sigmoid" for n in m.graph.node for i in n.input)
print("BUG: Softsign after Sigmoid" if bug else "fine")
sys.exit(3 if bug else 0)
"""


def test_a_check_that_breaks_for_its_own_reason_does_not_steer_the_reduction(
    cli: Cli, tmp_path: Path, planted: Path
) -> None:
    """The check exits 3 on the bug but 1 whenever its own assumption breaks. Keeping any
    non-zero exit drifts to a model without the trigger; keeping the original's exit code
    (or its message) keeps the trigger."""
    script = tmp_path / "brittle.py"
    script.write_text(BRITTLE_CHECK)
    check = f"{sys.executable} {script} {{model}}"
    for extra in ([], ["--fail-regex", "BUG: Softsign"], ["--fail-code", "3"]):
        out = tmp_path / f"out{len(extra)}.onnx"
        r = cli("reduce", str(planted), "--check", check, "--out", str(out), *extra)
        assert r.code == 0, r.err
        ops = [n.op_type for n in onnx.load(str(out)).graph.node]
        assert ops == ["Sigmoid", "Softsign"], (extra, ops)
    r = cli("reduce", str(planted), "--check", check, "--fail-code", "1", "--out", str(tmp_path / "x.onnx"))
    assert r.code == 1 and "not the one asked for" in r.err_lines[-1]
    r = cli("reduce", str(planted), "--check", check, "--fail-regex", "(", "--out", str(tmp_path / "x.onnx"))
    assert r.code == 1 and "--fail-regex: not a regular expression" in r.err_lines[-1]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["missing.onnx", "--check", "false {model}"], "no such file"),
        (["corrupt.onnx", "--check", "false {model}"], "not a readable ONNX model"),
        (["model.onnx", "--check", "false {model}", "--budget", "soon"], "--budget"),
        (["model.onnx", "--check", "true {model}"], "exits 0 on the original model"),
        (["model.onnx", "--check", "false"], "must contain {model}"),
        (["model.onnx"], "needs --config fuzzbot.yml or --check"),
        (["nowhere"], "no such file or folder"),
        (["bare"], "not a finding bundle"),
    ],
)
def test_bad_input_is_one_error_line(cli: Cli, tmp_path: Path, planted: Path, args: list[str], expected: str) -> None:
    (tmp_path / "corrupt.onnx").write_bytes(b"\x08\x07garbage")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "model.onnx").write_bytes(planted.read_bytes())
    args = [str(tmp_path / a) if a.endswith(".onnx") or a in ("nowhere", "bare") else a for a in args]
    r = cli("reduce", *args)
    assert r.code == 1
    assert len(r.err_lines) == 1 and r.err_lines[0].startswith("error:"), r.err
    assert expected in r.err
    assert "Traceback" not in r.err


def _beside(model: onnx.ModelProto, other: onnx.ModelProto, prefix: str) -> onnx.ModelProto:
    """`model` with `other`'s graph added as a branch of its own, every name prefixed."""
    both = onnx.ModelProto()
    both.CopyFrom(model)
    g, o = both.graph, other.graph
    for node in o.node:
        copy = g.node.add()
        copy.CopyFrom(node)
        copy.input[:] = [prefix + n if n else n for n in node.input]
        copy.output[:] = [prefix + n for n in node.output]
        copy.name = f"{prefix}{node.name or node.op_type}"
    for items, theirs in ((g.initializer, o.initializer), (g.input, o.input), (g.output, o.output)):
        for item in theirs:
            copy = items.add()
            copy.CopyFrom(item)
            copy.name = prefix + item.name
    onnx.checker.check_model(both, full_check=True)
    return both


def _wrong_result_bundle(dest: Path) -> Path:
    """A real onnxruntime wrong result in a model the reducer has to cut down: PadFusion's
    MaxPool bug (tests/release_cases.py, wrong at `all` from 1.20.1 to 1.31.1) beside a
    generated 8-node model that onnxruntime runs right."""
    spec = parse_backend("onnxruntime:all")
    bug, bug_inputs = rc.maxpool_after_zero_pad()
    with WorkerClient(spec) as client:
        for seed in range(40):
            case = generate(seed, GenConfig(nodes=8, dtypes=[DType.float32]))
            model = _beside(case.model, bug, "bug_")
            inputs = {**case.inputs, **{f"bug_{k}": v for k, v in bug_inputs.items()}}
            try:
                reference = run_reference(model, inputs)
            except ReferenceError:
                continue
            result = client.run(model.SerializeToString(), inputs)
            bounds = ToleranceConfig().for_outputs(model, "onnxruntime")
            j = judge(result, reference, op_signature(model), per_output=bounds)
            wrong = [o.name for o in j.comparison.outputs if o.mismatch is not None] if j.comparison else []
            if j.verdict is Verdict.wrong_result and wrong == ["bug_y"] and result.backend is not None:
                finding = Finding(**dict(j), backend=result.backend, seed=seed)
                repro = render_repro(model, inputs, reference, spec, j.signature)
                return write_bundle(dest, model, inputs, reference, finding, repro)
    pytest.skip("this onnxruntime no longer folds a zero Pad into MaxPool's -inf padding")


def test_real_wrong_result_reduces_to_a_failing_repro(cli: Cli, tmp_path: Path) -> None:
    bundle = _wrong_result_bundle(tmp_path / "finding")
    before = len(load_bundle(bundle).model.graph.node)
    r = cli("reduce", str(bundle), "--jobs", "2", "--budget", "60s")
    assert r.code == 0, r.err
    reduced = bundle / "reduced"
    small = load_bundle(reduced)
    assert len(small.model.graph.node) <= max(3, before // 2)
    assert small.finding is not None and small.finding.verdict is Verdict.wrong_result
    result = json.loads((reduced / "reduction.json").read_text())
    assert result["nodes_before"] == before and result["stats"]["tests"] > 0 and result["steps"]
    assert (reduced / "model.txt").read_text().strip()
    repro = subprocess.run([sys.executable, str(reduced / "repro.py")], capture_output=True, text=True, timeout=120)
    assert repro.returncode == 1, repro.stdout + repro.stderr
    assert "BUG:" in repro.stdout


def test_injected_segfault_reduces_to_one_node(cli: Cli, tmp_path: Path) -> None:
    case = generate(3, GenConfig(nodes=4))
    spec = parse_backend("onnxruntime:all")
    fault: FaultSpec = {"kind": "segv", "every": 1}
    with WorkerClient(spec, fault=fault) as client:
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
    assert len(small.model.graph.node) == 1
    assert small.finding is not None and small.finding.symptom == j.symptom


def test_crash_messages_match_by_normalized_similarity() -> None:
    from oracles.bug_identity import similar_messages

    a = "RuntimeError: [ONNXRuntimeError] : 1 : FAIL : Node (n3_Conv) Op (Conv) kernel 3 mismatch at /tmp/y.cc:12"
    same_bug = "RuntimeError: [ONNXRuntimeError] : 1 : FAIL : Node (n0) Op (Conv) kernel 5 mismatch at /src/y.cc:99"
    other = "ValueError: cannot reshape array of size 6 into shape (4,)"
    assert similar_messages(a, same_bug)
    assert not similar_messages(a, other)


def test_an_original_that_fails_only_now_and_then_is_asked_again_before_the_reduction_gives_up(
    tmp_path: Path,
) -> None:
    """onnxruntime 1.30.0's "wrap" Pad writes whatever memory held: wrong values in one run,
    right ones in another. A campaign that asked each original once reduced none of 80 such
    findings. Here a worker gets every other run wrong (the `flaky` test fault): the finding
    was its wrong run, so the reduction's first ask lands on a right one, and the second
    shows the failure again. Asked once, the reduction gave up on it."""
    from bot.reduce.candidates import ClientPool, reduce_bundle

    case = generate(5, GenConfig(nodes=4))
    spec = parse_backend("onnxruntime:all")
    fault: FaultSpec = {"kind": "flaky", "every": 1}
    pool = ClientPool(lambda: WorkerClient(spec, fault=fault), 1)
    try:
        with pool.lend() as client:
            result = client.run(case.model.SerializeToString(), case.inputs)
        reference = run_reference(case.model, case.inputs)
        j = judge(result, reference, op_signature(case.model))
        assert j.verdict is Verdict.wrong_result and result.backend is not None, j
        bundle = write_bundle(
            tmp_path / "flaky", case.model, case.inputs, reference, Finding(**dict(j), backend=result.backend)
        )
        reduced = reduce_bundle(bundle, 30.0, max_tests=40, pool=pool, judging=Judging.shipped())
    finally:
        pool.close()
    assert load_bundle(reduced).finding is not None


def test_a_reduced_trigger_that_fails_only_after_other_cases_is_not_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reduction runs every candidate in one long-lived worker. onnxruntime 1.30.0's wrap
    Pad, reduced there to a Pad beside a TopK, failed in that worker, and its repro passed 6
    runs of 6 in fresh processes. Here the `poison` test fault breaks a worker for every case
    after its first: the finding and each candidate fail in the reduction's worker, and the
    reduced trigger passes in each fresh one, so the reduction is not kept."""
    from bot.config import ReduceSettings
    from bot.reduce.finding import reduce_one
    from bot.reduce.workers import SidePools, SideRun

    case = generate(5, GenConfig(nodes=4))
    fault: FaultSpec = {"kind": "poison", "every": 1}
    with WorkerClient(parse_backend("onnxruntime:all"), fault=fault) as client:
        client.run(case.model.SerializeToString(), case.inputs)  # right, and it breaks the worker
        result = client.run(case.model.SerializeToString(), case.inputs)
    j = judge(result, run_reference(case.model, case.inputs), op_signature(case.model))
    assert j.verdict is Verdict.crash and result.backend is not None, j
    finding = Finding(**dict(j), backend=result.backend, spec="onnxruntime:all")
    bundle = write_bundle(tmp_path / "stale", case.model, case.inputs, run_reference(case.model, case.inputs), finding)
    pools = SidePools({"head": SideRun("onnxruntime:all", sys.executable, 30.0, fault)}, Judging.shipped())
    try:
        reduced = reduce_one(bundle, finding, None, pools, ReduceSettings(budget=30, max_tests=40, generalize=False))
    finally:
        pools.close()
    assert reduced is None and not (bundle / "reduced").exists()
    assert "fails only in a worker that ran others" in capsys.readouterr().err


def test_a_bundle_whose_reference_asks_past_the_bound_is_one_error_line(cli: Cli, tmp_path: Path) -> None:
    """A campaign's model may ask for a tensor of any size; reducing its bundle computes the
    reference in this process, bounded as a campaign is (`--memory`), never until the
    machine runs out (3 GiB here, against 768 MiB)."""
    model = filled(3 * GIB // 4)
    spec = parse_backend("onnxruntime:all")
    with WorkerClient(spec, fault={"kind": "segv", "every": 1}) as client:
        result = client.run(model.SerializeToString(), X)
    j = judge(result, {}, op_signature(model))  # a crash is judged without the reference
    assert j.verdict is Verdict.crash and result.backend is not None
    bundle = write_bundle(tmp_path / "crash", model, X, None, Finding(**dict(j), backend=result.backend))
    args = ["reduce", str(bundle), "--test-fault", "segv", "--budget", "60s", "--out", str(tmp_path / "small")]
    r = cli(*args, "--memory", "768MiB")
    assert r.code == 1 and len(r.err_lines) == 1, r.err
    assert "asks for more memory than --memory 768MiB" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "small").exists()
    r = cli(*args, "--memory", "lots")
    assert r.code == 1 and "'lots' is not a size" in r.err
    r = cli(*args[:2], "--check", "false {model}", "--memory", "1GiB")
    assert r.code == 1 and "--memory goes with a bundle" in r.err
