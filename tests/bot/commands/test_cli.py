"""The `fuzzbot` commands end to end, on the real onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml
from onnx import TensorProto, helper

from bot import __version__
from bot.campaign.run import Campaign
from bot.campaign.state import CampaignState
from bot.cases.making import Prepared
from bot.config import FuzzConfig, load_config
from bot.config import TestFault as Fault
from bot.findings.bundle import Finding
from bot.findings.summary import Summary
from bot.github.findings import load_report
from bot.github.render import pr_comment
from generator.api import GenConfig
from tests.conftest import CliResult
from tests.paths import ROOT

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

Cli = Callable[..., CliResult]


def _summary(out: Path) -> Summary:
    return Summary.model_validate_json((out / "summary.json").read_text())


def test_short_campaign_runs_twenty_tests_and_writes_a_valid_summary(
    cli: Cli, tmp_path: Path, probe_cache: str
) -> None:
    r = cli("fuzz", "--budget", "6s", "--out", str(tmp_path), "--nodes", "5", "--cache-dir", probe_cache)
    s = _summary(tmp_path)
    assert s.support is not None and s.support.supported > 100 and not s.support.unexpected
    assert s.coverage.models >= s.tests and s.coverage.op_pairs > 0 and s.coverage.op_types > 10
    assert "support:" in r.err
    assert r.code == (2 if s.finding_count else 0)
    assert s.tests >= 20
    assert sum(s.counts.values()) == s.tests
    assert s.backend is not None and s.backend.name == "onnxruntime"
    assert s.time_s.generation > 0 and s.time_s.reference > 0 and s.time_s.backend > 0
    assert 5.5 <= s.wall_s < 30
    assert "tests" in r.err and "verdict" in r.err
    assert f"on onnxruntime {s.backend.version}" in r.err  # the build, with its version
    assert s.fuzzbot_version == __version__ and f"(fuzzbot {__version__})" in pr_comment(load_report(tmp_path))


def test_perturbed_outputs_are_caught_as_wrong_results(cli: Cli, tmp_path: Path, probe_cache: str) -> None:
    r = cli(
        "fuzz",
        "--budget",
        "60s",
        "--max-tests",
        "6",
        "--out",
        str(tmp_path),
        "--test-fault",
        "perturb",
        "--cache-dir",
        probe_cache,
    )
    assert r.code == 2
    s = _summary(tmp_path)
    assert s.counts == {"wrong_result": 6}
    bundle = tmp_path / s.findings[0].path
    assert {p.name for p in bundle.iterdir()} == {
        "model.onnx",
        "inputs.npz",
        "reference.npz",
        "finding.json",
        "repro.py",
        "reduced",
    }
    finding = Finding.model_validate_json((bundle / "finding.json").read_text())
    assert finding.comparison is not None and not finding.comparison.ok
    # Reduced after the budget: every model is wrong on a perturbing worker, so one node is left.
    assert s.findings[0].reduced_nodes == 1 and (bundle / "reduced" / "model.txt").is_file()
    assert finding.backend.version and finding.seed == s.findings[0].seed
    # The fault lives in the worker only: the real onnxruntime is correct, so the
    # standalone repro and `fuzzbot run` both see a pass on the same bundle.
    repro = subprocess.run([sys.executable, str(bundle / "repro.py")], capture_output=True, text=True, timeout=120)
    assert repro.returncode == 0, repro.stdout + repro.stderr
    assert "OK" in repro.stdout
    rerun = cli("run", str(bundle), "--json")
    assert rerun.code == 0
    assert json.loads(rerun.out)["results"][0]["verdict"] == "pass"


def test_repro_exits_nonzero_while_the_bug_is_present(cli: Cli, tmp_path: Path, probe_cache: str) -> None:
    cli(
        "fuzz",
        "--budget",
        "60s",
        "--max-tests",
        "1",
        "--out",
        str(tmp_path),
        "--test-fault",
        "perturb",
        "--cache-dir",
        probe_cache,
    )
    bundle = tmp_path / _summary(tmp_path).findings[0].path
    script = (bundle / "repro.py").read_text()
    # Break the expectation itself: the real onnxruntime now disagrees with it.
    broken = script.replace("def main():", "def main():\n    EXPECTED.update({k: v + 1 for k, v in EXPECTED.items()})")
    (bundle / "repro.py").write_text(broken)
    repro = subprocess.run([sys.executable, str(bundle / "repro.py")], capture_output=True, text=True, timeout=120)
    assert repro.returncode == 1
    assert "BUG:" in repro.stdout


@pytest.mark.parametrize(("fault", "verdict"), [("segv:3", "crash"), ("hang:2", "timeout")])
def test_crashing_or_hanging_worker_does_not_stop_the_campaign(
    cli: Cli, tmp_path: Path, fault: str, verdict: str
) -> None:
    r = cli(
        "fuzz",
        "--budget",
        "90s",
        "--max-tests",
        "16",
        "--timeout",
        "2s",
        "--out",
        str(tmp_path),
        "--test-fault",
        fault,
        "--no-probe",
    )
    assert r.code == 2
    s = _summary(tmp_path)
    assert s.tests == 16
    assert s.counts.get(verdict, 0) >= 1
    assert s.counts.get("pass", 0) >= 1
    assert s.worker_restarts >= 1
    ref = next(f for f in s.findings if f.verdict.value == verdict)
    finding = Finding.model_validate_json((tmp_path / ref.path / "finding.json").read_text())
    assert finding.verdict.value == verdict
    assert finding.stage == ("compile" if verdict == "crash" else "run")  # the faults: a segv compiling, a hung kernel
    if verdict == "crash":
        assert "SIGSEGV" in finding.message


def test_gen_stats_shows_the_three_coverage_kinds(cli: Cli) -> None:
    r = cli("gen", "--count", "30", "--stats", "--no-bundles")
    assert r.code == 0
    for label in ("op types", "op inputs", "attribute values", "directed op pairs"):
        assert label in r.out
    pairs = next(line for line in r.out.splitlines() if "directed op pairs" in line)
    assert int(pairs.split("│")[-2].strip()) > 30


def test_gen_is_byte_identical_for_one_seed(cli: Cli, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert cli("gen", "--seed", "42", "--count", "3", "--nodes", "8", "--out", str(a)).code == 0
    assert cli("gen", "--seed", "42", "--count", "3", "--nodes", "8", "--out", str(b)).code == 0
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    # A seed whose values cannot be made finite is dropped, the same way both times.
    assert len(files) >= 6 and files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def test_run_accepts_a_bare_onnx_file(cli: Cli, tmp_path: Path) -> None:
    cli("gen", "--seed", "5", "--out", str(tmp_path), "--dtypes", "float32", "--ops", "Add,Relu,Conv,MatMul,Transpose")
    r = cli("run", str(tmp_path / "seed-5" / "model.onnx"), "--backend", "onnxruntime:disable")
    assert r.code == 0, r.err
    assert "pass" in r.out and "onnxruntime:disable" in r.out


def _one_line_error(r: CliResult, *needles: str) -> None:
    assert r.code == 1
    assert len(r.err_lines) == 1, r.err
    assert r.err_lines[0].startswith("error:")
    assert "Traceback" not in r.err
    for n in needles:
        assert n in r.err_lines[0]


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--jobs", "0"], "error: --jobs 0: Input should be greater than or equal to 1"),
        (["--max-tests", "-1"], "error: --max-tests -1: Input should be greater than or equal to 1"),
        (["--timeout", "-1"], "error: --timeout -1: '-1' is not a duration such as 90s, 2m or 1h"),
        (["--nodes", "0"], "error: --nodes 0: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_flag_value_is_named_by_its_flag(cli: Cli, tmp_path: Path, flags: list[str], line: str) -> None:
    """Not by the config key the user never wrote (`key 'jobs'`): the flag and its value."""
    r = cli("fuzz", *flags, "--out", str(tmp_path / "out"))
    assert r.code == 1 and [x for x in r.err.splitlines() if x.strip()] == [line], r.err
    config = tmp_path / "fuzzbot.yml"
    config.write_text("jobs: 0\n")
    r = cli("fuzz", "--config", str(config), "--out", str(tmp_path / "out"))  # from the file: its key
    assert r.err.strip() == f"error: {config}: key 'jobs': Input should be greater than or equal to 1", r.err


def test_bad_input_gets_one_line_and_exit_1(cli: Cli, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage\xff\xff\xff")
    bad_yaml = tmp_path / "bad.yml"
    bad_yaml.write_text("budget: [1, 2\n")
    bad_key = tmp_path / "key.yml"
    bad_key.write_text("generator:\n  nodes: -3\n")
    _one_line_error(cli("run", str(tmp_path / "missing.onnx")), "missing.onnx")
    _one_line_error(cli("run", str(corrupt)), "corrupt.onnx")
    _one_line_error(cli("run", str(corrupt), "--backend", "tensorflow"), "valid backends: onnxruntime")
    _one_line_error(cli("fuzz", "--backend", "onnxruntime:O9", "--out", str(tmp_path)), "valid levels")
    _one_line_error(cli("fuzz", "--config", str(bad_yaml)), "bad.yml", "YAML")
    _one_line_error(cli("fuzz", "--config", str(bad_key)), "key.yml", "generator.nodes")
    _one_line_error(cli("fuzz", "--budget", "soon"), "budget")
    _one_line_error(cli("fuzz", "--python", "/no/such/python", "--out", str(tmp_path)), "/no/such/python")
    _one_line_error(cli("fuzz", "--no-such-flag"), "no-such-flag")
    _one_line_error(cli("gen", "--dtypes", "float33", "--no-bundles"), "dtypes", "float32")
    _one_line_error(cli("gen", "--ops", "Relu", "--dtypes", "bool", "--no-bundles"), "none of the 1 seed")
    _one_line_error(cli("frobnicate"))


def test_gen_makes_its_cases_under_a_memory_bound_and_drops_what_asks_more(cli: Cli, tmp_path: Path) -> None:
    """`gen` computes each case's values and reference in its own process, on a model the
    generator drew, and one may ask for a tensor of any size: bounded as a campaign is, a
    case past the bound is dropped and said, never the machine's memory. A fresh process,
    as a user runs it: one that has made cases before reuses the memory they freed."""
    tight = subprocess.run(
        [sys.executable, "-m", "bot.cli", "gen", "--count", "2", "--out", str(tmp_path / "tight"), "--memory", "1MiB"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tight.returncode == 1 and tight.stderr.splitlines() == [
        "error: gen: none of the 2 seed(s) gave a case: 2 asking more memory than --memory"
    ], tight.stderr
    assert not list((tmp_path / "tight").glob("seed-*"))
    roomy = cli("gen", "--count", "2", "--out", str(tmp_path / "roomy"), "--memory", "none")
    assert roomy.code == 0, roomy.err
    assert len(list((tmp_path / "roomy").glob("seed-*/model.onnx"))) == 2
    _one_line_error(cli("gen", "--memory", "lots", "--no-bundles"), "--memory", "'lots'")


def test_a_binary_config_and_a_bad_option_value_say_what_is_wrong(cli: Cli, tmp_path: Path) -> None:
    binary = tmp_path / "model.yml"
    binary.write_bytes(b"\x08\x07\xff\xfe\x00binary")
    _one_line_error(cli("fuzz", "--config", str(binary)), "model.yml: not a YAML text file")
    rules = tmp_path / "rules.yml"
    rules.write_bytes(b"\xff\xfe")
    _one_line_error(cli("fuzz", "--rules", str(rules), "--out", str(tmp_path / "o")), "oracles.rules", "rules.yml")
    # A text file with a bad rule is refused at the same point, before any build or probe.
    rules.write_text("rules:\n  - id: x\n    colour: red\n")
    _one_line_error(cli("fuzz", "--rules", str(rules), "--out", str(tmp_path / "o")), "oracles.rules", "rule 'x'")
    cli("gen", "--seed", "5", "--out", str(tmp_path / "g"), "--nodes", "2")
    bad = cli("run", str(tmp_path / "g" / "seed-5"), "--backend", "onnxruntime,threads=abc")
    _one_line_error(bad, "option threads='abc' for onnxruntime is not a whole number")
    assert "importable" not in bad.err


def test_run_says_in_one_line_which_backend_is_unavailable(cli: Cli, tmp_path: Path) -> None:
    cli("gen", "--seed", "5", "--out", str(tmp_path), "--nodes", "2")
    r = cli(
        "run",
        str(tmp_path / "seed-5"),
        *("--backend", "onnxruntime", "--backend", "onnxruntime:disable"),
        *("--python", sys.executable, "--python", "/no/such/python"),
    )
    _one_line_error(r, "error: backend onnxruntime:disable is unavailable (1 of 2 backends ran)", "/no/such/python")
    assert "onnxruntime:all" in r.out and "pass" in r.out


BOT_ONLY = """
import sys
from bot.cli import main
code = main(["fuzz", "--budget", "30s", "--max-tests", "3", "--out", sys.argv[1], "--cache-dir", sys.argv[2]])
leaked = sorted({"onnxruntime", "tvm", "openvino", "tensorrt"} & set(sys.modules))
print("LEAKED", leaked, "CODE", code)
"""


def test_the_bot_process_never_imports_a_system_under_test(tmp_path: Path, probe_cache: str) -> None:
    """A whole campaign, probing included, in a fresh interpreter: only workers import
    the system under test (the test session itself imports onnxruntime for its checks)."""
    done = subprocess.run(
        [sys.executable, "-c", BOT_ONLY, str(tmp_path), probe_cache], capture_output=True, text=True, timeout=300
    )
    assert "LEAKED [] CODE" in done.stdout, done.stdout + done.stderr[-2000:]


def test_example_config_is_valid_and_complete() -> None:
    example = ROOT / "examples" / "fuzzbot.yml"
    cfg = load_config(example, {})
    assert cfg == FuzzConfig.model_validate(cfg.model_dump())
    assert cfg.budget == 120.0 and cfg.timeout == 10.0
    documented = set(yaml.safe_load(example.read_text()))
    assert documented == set(FuzzConfig.model_fields) - {"test_fault"}
    assert set(yaml.safe_load(example.read_text())["generator"]) == set(GenConfig.model_fields)


def test_every_example_config_loads() -> None:
    """The configs a maintainer copies (the demo's, onnx2torch's) are valid as they stand."""
    examples = sorted((ROOT / "examples").glob("*.yml"))
    assert len(examples) >= 3
    for example in examples:
        assert load_config(example, {}).backend, example


def test_interrupted_campaign_keeps_its_summary(tmp_path: Path, probe_cache: str) -> None:
    def stop_after_three(s: CampaignState) -> None:
        if s.tests == 3:
            raise KeyboardInterrupt

    campaign = Campaign(FuzzConfig(budget=60, out=tmp_path, cache_dir=Path(probe_cache)))
    with pytest.raises(KeyboardInterrupt):
        campaign.run(stop_after_three)
    s = _summary(tmp_path)
    assert s.tests == 3 and s.stopped_by == "SIGINT" and s.interrupted
    assert "**Interrupted by SIGINT at" in (tmp_path / "summary.md").read_text()


def _sqrt_case(x: np.ndarray) -> Prepared:
    node = helper.make_node("Sqrt", ["x"], ["y"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    reference = {"y": np.sqrt(x)}
    return Prepared(0, model, model.SerializeToString(), {"x": x}, reference)


def test_a_difference_on_an_operand_inside_its_margin_is_filtered_not_reported(tmp_path: Path) -> None:
    """The same real wrong output (a perturbing worker, on the first element) is a finding
    when Sqrt's operand is well inside its domain, and only counted as unstable when that
    element's operand sits within the margin of zero."""
    campaign = Campaign(FuzzConfig(out=tmp_path, probe=False, test_fault=Fault(kind="perturb")))
    try:
        for x in (np.full((4,), 2.0, np.float32), np.array([1e-7, 2.0, 2.0, 2.0], np.float32)):
            case = _sqrt_case(x)
            campaign.record(case, [campaign.client.run(case.model_bytes, case.inputs)])
    finally:
        campaign.close()
    assert campaign.counts == {"wrong_result": 1, "filtered:unstable-margin": 1}
    kept = campaign.state.kept.findings
    assert len(kept) == 1 and campaign.state.finding_count == 1
    finding = Finding.model_validate_json((tmp_path / kept[0].path / "finding.json").read_text())
    assert finding.runs == ["wrong_result"] * 3 and finding.across == "persistent"
    assert finding.localization is not None and finding.localization.level == "disable"
    assert not finding.localization.depends_on_optimization  # the fault perturbs every level alike


def test_version_is_printed_and_a_bare_command_shows_the_help_with_no_empty_error(cli: Cli) -> None:
    r = cli("--version")
    assert r.code == 0 and r.out.strip() == f"fuzzbot {__version__}" and not r.err
    bare = cli()
    assert bare.code == 1 and "Usage: fuzzbot" in bare.out + bare.err
    assert not [line for line in bare.err_lines if line.startswith("error:")], bare.err


def test_fuzz_help_shows_the_config_s_defaults_one_way(cli: Cli) -> None:
    """Every default `fuzz --help` shows reads `[default: X]` (typer's own way, plain text,
    not a Rich tag that swallowed it), and is the campaign config's default."""
    import re

    from bot.config import FuzzConfig

    r = cli("fuzz", "--help")
    assert r.code == 0
    options: dict[str, str] = {}
    for line in r.out.splitlines():
        if line.startswith("  --"):
            name = line.split()[0].removeprefix("--")
            options[name] = line
        elif options and line.startswith("      "):
            options[name] += " " + line.strip()
    shown = {k: m.group(1) for k, v in options.items() if (m := re.search(r"\[default: ([^\]]+)\]", v))}
    text = r.out
    cfg = FuzzConfig()
    expected = {
        "budget": f"{cfg.budget:g}s",
        "out": str(cfg.out),
        "seed": str(cfg.seed),
        "backend": cfg.backend,
        "nodes": str(cfg.generator.nodes),
        "timeout": f"{cfg.timeout:g}s",
        "compile-timeout": f"{cfg.compile_timeout:g}s",
        "jobs": str(cfg.jobs),
        "cache-dir": str(cfg.cache_dir),
    }
    assert {k: v.replace("- ", "-").replace(" ", "") for k, v in shown.items() if k in expected} == expected, shown
    assert "(default" not in text and "default is" not in text  # no other spelling
