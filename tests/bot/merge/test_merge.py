"""`fuzzbot merge` and `fuzzbot config-schema` end to end: two real shards of one
campaign on the real onnxruntime (the perturb fault makes every model a wrong result),
merged through the real CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from bot.cli import main
from bot.config import FuzzConfig
from bot.findings.bundle import Finding, write_bundle
from bot.findings.outcome import findings_exit
from bot.findings.store import FindingStore, StoredFinding
from bot.findings.summary import FindingRef, Summary, write_summary
from bot.findings.summary_md import MAX_ROWS, render_summary_md
from bot.merge.outputs import merge_summaries, shard_id
from generator.coverage import CoverageStats
from oracles.sides import CrossVerdict
from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

Cli = Callable[..., CliResult]

SHARD_CONFIG = "generator:\n  ops: [Relu, Neg]\n  nodes: 2\nreduce:\n  enabled: false\n"
"""Two ops, two nodes: few op signatures, so both shards hit the same bugs. Unreduced, so
the fingerprints stay the campaign's (the perturbing fault reduces every seed to a
different single op)."""


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("shards")
    config = root / "fuzzbot.yml"
    config.write_text(SHARD_CONFIG)
    outs = []
    for i in (0, 1):
        out = root / f"shard-{i}"
        args = ["fuzz", "--config", str(config), "--out", str(out), "--max-tests", "4", "--budget", "60s"]
        code = main([*args, "--no-probe", "--test-fault", "perturb", "--seed", "0", "--shard", f"{i}/2"])
        assert code == 2, "the perturbed worker gives wrong results, so each shard has findings"
        outs.append(out)
    return outs[0], outs[1]


@pytest.fixture(scope="module")
def flaky_shard(shards: tuple[Path, Path]) -> Path:
    """Shard 1/2 again, on a worker that answers differently each run: set-aside cases only."""
    out = shards[0].parent / "flaky-1"
    args = ["fuzz", "--config", str(shards[0].parent / "fuzzbot.yml"), "--out", str(out), "--max-tests", "4"]
    main([*args, "--budget", "60s", "--no-probe", "--test-fault", "flaky", "--seed", "0", "--shard", "1/2"])
    return out


def _summary(out: Path) -> Summary:
    return Summary.model_validate_json((out / "summary.json").read_text())


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def test_two_shards_with_the_same_bugs_merge_into_one_finding_per_fingerprint(
    cli: Cli, shards: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = _summary(shards[0]), _summary(shards[1])
    common = set(a.occurrences) & set(b.occurrences)
    assert common, "both shards should hit the same fingerprints"
    r = cli("merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "m"))
    assert r.code == 2 and "merged 2 output(s)" in r.err
    m = _summary(tmp_path / "m")
    assert m.tests == a.tests + b.tests == 8
    assert m.counts == {k: a.counts.get(k, 0) + b.counts.get(k, 0) for k in a.counts | b.counts}
    assert m.value_work == {k: a.value_work.get(k, 0) + b.value_work.get(k, 0) for k in a.value_work | b.value_work}
    assert m.time_s.values == a.time_s.values + b.time_s.values > 0
    for fp in a.occurrences | b.occurrences:
        assert m.occurrences[fp] == a.occurrences.get(fp, 0) + b.occurrences.get(fp, 0)
    assert sorted(f.fingerprint for f in m.findings) == sorted(set(a.occurrences) | set(b.occurrences))
    bundles = sorted(p.name for p in (tmp_path / "m" / "findings").iterdir())
    assert bundles == sorted(Path(f.path).name for f in m.findings)
    assert all((tmp_path / "m" / "findings" / n / "finding.json").is_file() for n in bundles)
    rows = {r.fingerprint: r for r in FindingStore.in_dir(tmp_path / "m").all()}
    assert {fp: r.count for fp, r in rows.items()} == m.occurrences
    assert all(r.first_shard in ("0/2", "1/2") for r in rows.values())
    assert m.seed_first == 0 and m.seed_last == max(a.seed_last or 0, b.seed_last or 0)
    assert json.loads((tmp_path / "m" / "summary.json").read_text())["merged_from"] == ["0/2@0", "1/2@0"]


def _reduced_in(shards: tuple[Path, Path], second: Path) -> tuple[str, Path]:
    """A one-node reduced bundle for a fingerprint both shards hit, written into `second`
    (a copy of shard 1) as its reduction would: the fingerprint and the bundle."""
    fp = sorted(set(_summary(shards[0]).occurrences) & set(_summary(second).occurrences))[0]
    bundle = next((second / "findings").glob(f"*-{fp}-seed*"))
    finding = Finding.model_validate_json((bundle / "finding.json").read_text())
    relu = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "reduced",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    x = {"x": np.ones(1, np.float32)}
    model = helper.make_model(relu, opset_imports=[helper.make_opsetid("", 17)])
    write_bundle(bundle / "reduced", model, x, x, finding)
    return fp, bundle


def test_the_smallest_reduced_bundle_is_the_one_kept(cli: Cli, shards: tuple[Path, Path], tmp_path: Path) -> None:
    second = _copy(shards[1], tmp_path / "shard-1")
    fp, bundle = _reduced_in(shards, second)
    assert cli("merge", str(shards[0]), str(second), "--out", str(tmp_path / "m")).code == 2
    row = FindingStore.in_dir(tmp_path / "m").get(fp)
    assert row is not None and row.reduced and row.nodes == 1
    assert row.smallest == f"findings/{bundle.name}/reduced"
    kept = tmp_path / "m" / row.smallest / "model.onnx"
    assert len(onnx.load(str(kept)).graph.node) == 1
    ref = next(f for f in _summary(tmp_path / "m").findings if f.fingerprint == fp)
    assert ref.reduced_nodes == 1 and ref.reduced_path == f"findings/{bundle.name}/reduced"


def test_a_merge_adds_what_the_shards_reduced_to_the_regression_corpus(
    cli: Cli, shards: tuple[Path, Path], tmp_path: Path
) -> None:
    """Shards leave the regression corpus alone; the nightly's merge job feeds it."""
    second = _copy(shards[1], tmp_path / "shard-1")
    fp, _ = _reduced_in(shards, second)
    corpus = tmp_path / "regressions"
    r = cli("merge", str(shards[0]), str(second), "--out", str(tmp_path / "m"), "--regressions", str(corpus))
    assert r.code == 2 and "added 1 reduced finding(s)" in r.err
    assert [p.name for p in corpus.iterdir()] == [fp]
    assert len(onnx.load(str(corpus / fp / "model.onnx")).graph.node) == 1, "the reduced bundle, not the sighting"
    again = cli("merge", str(shards[0]), str(second), "--out", str(tmp_path / "m2"), "--regressions", str(corpus))
    assert "added 0 reduced finding(s)" in again.err


def test_merging_is_idempotent(cli: Cli, shards: tuple[Path, Path], tmp_path: Path) -> None:
    once, twice, step = tmp_path / "once", tmp_path / "twice", tmp_path / "step"
    assert cli("merge", str(shards[0]), str(shards[1]), "--out", str(once)).code == 2
    assert cli("merge", str(shards[0]), str(shards[1]), str(shards[0]), "--out", str(twice)).code == 2
    again = cli("merge", str(shards[1]), str(shards[0]), "--out", str(twice))
    assert f"merged 0 output(s) into {twice} (skipped 2 already merged)" in again.err, "nothing new was merged"
    assert cli("merge", str(shards[0]), "--out", str(step)).code == 2
    assert cli("merge", str(shards[1]), "--out", str(step)).code == 2  # a late shard joins an earlier merge
    assert cli("merge", str(once), str(shards[1]), "--out", str(tmp_path / "sup")).code == 2  # merge + its shard
    expected = _summary(once)
    for out in (twice, step, tmp_path / "sup"):
        s = _summary(out)
        assert (s.tests, s.counts, s.occurrences) == (expected.tests, expected.counts, expected.occurrences), out
        rows = [(r.fingerprint, r.count) for r in FindingStore.in_dir(out).all()]
        assert rows == [(r.fingerprint, r.count) for r in FindingStore.in_dir(once).all()]
        assert len(list((out / "findings").iterdir())) == len(expected.findings)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary folder is left behind"


def _as_two_builds(shard: Path, dest: Path, label: str) -> Path:
    """A copy of a shard as a two-build campaign's output that saw each of its bugs on both
    builds (persistent), or with its first bug new in head (new_regression)."""
    out = _copy(shard, dest)
    s = _summary(out)
    s.base = s.backend
    for i, ref in enumerate(s.findings):
        ref.across = CrossVerdict(label if i == 0 else "persistent")
    s.counts = {"persistent": s.tests}
    write_summary(s, out)
    return out


@pytest.mark.parametrize(("label", "code"), [("persistent", 0), ("new_regression", 2)])
def test_a_merge_exits_as_the_campaign_would_on_the_same_findings(
    cli: Cli, shards: tuple[Path, Path], tmp_path: Path, label: str, code: int
) -> None:
    """Two builds: bugs both share do not fail a PR check, in a campaign or in its merge."""
    shard = _as_two_builds(shards[0], tmp_path / "shard", label)
    assert findings_exit(_summary(shard)) == code
    r = cli("merge", str(shard), "--out", str(tmp_path / "m"))
    assert r.code == code, r.err
    assert _summary(tmp_path / "m").distinct.get("persistent", 0) >= 1


def test_the_merged_summary_md_lists_every_finding_with_a_working_link(
    cli: Cli, shards: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "m"
    cli("merge", str(shards[0]), str(shards[1]), "--out", str(out))
    md = (out / "summary.md").read_text()
    s = _summary(out)
    assert "merged from 2 shard(s)" in md and f"**{s.tests} tests**" in md
    assert f"| wrong_result | {s.counts['wrong_result']} | {s.distinct['wrong_result']} |" in md
    assert f"## Findings ({len(s.occurrences)})" in md
    for fp, n in s.occurrences.items():
        line = next(line for line in md.splitlines() if f"`{fp}`" in line)
        assert f"| {n} |" in line and "nodes" in line
        link = line.rsplit("](", 1)[1].split(")", 1)[0]
        assert (out / link / "finding.json").is_file()


def _row(i: int) -> StoredFinding:
    return StoredFinding(
        fingerprint=f"{i:016x}",
        verdict="crash" if i % 2 else "wrong_result",
        across="new_regression" if i % 3 == 0 else "persistent",
        signature="exception in " + ",".join(["Conv|Relu"] * 30),
        first_seen="2026-01-01T00:00:00+00:00",
        last_seen="2026-01-01T00:00:00+00:00",
        count=i + 1,
        bundle=f"findings/crash-{i:016x}-seed{i}",
        nodes=i % 7 + 1,
        reduced=i % 2 == 0,
    )


def test_summary_md_reads_well_with_no_findings_and_with_five_hundred() -> None:
    empty = render_summary_md(Summary(), [])
    assert "No findings." in empty and "(no test ran)" in empty
    summary = Summary(
        tests=900,
        counts={"persistent": 300, "new_regression": 200, "flaky": 3, "filtered:unstable-margin": 7, "pass": 390},
        dropped={"no_valid_values": 4},
    )
    md = render_summary_md(summary, [_row(i) for i in range(500)], {"flaky": 2})
    lines = md.splitlines()
    verdicts = [line.split("|")[1].strip() for line in lines if line.startswith("| ") and line.count("|") == 4]
    assert verdicts[1:3] == ["new_regression", "persistent"] and verdicts[-1] == "dropped: no_valid_values"
    assert "| persistent | 300 | 0 |" in md and "| flaky | 3 | |" in md, "tests beside findings; flaky has none"
    table = [line for line in lines if line.startswith("| ") and "`" in line]
    assert len(table) == MAX_ROWS and f"… and {500 - MAX_ROWS} more" in md
    assert "(new_regression)" in table[0], "new regressions come first"
    assert all(line.count(" | ") == 7 for line in table), "a | in a signature must not break the table"
    assert "…" in table[0] and max(len(line) for line in table) < 300, "long signatures are cut"
    assert "- flaky: 3 case(s); 2 bundle(s) in [flaky/](flaky/)" in md
    assert "- filtered:unstable-margin: 7 case(s); no bundle kept" in md


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("not-output", "not a campaign output (no summary.json)"),
        ("corrupt", "corrupt summary"),
        ("invalid", "corrupt summary (tests:"),
        ("out-is-input", "is also an input"),
        ("nested", "are nested"),
        ("into-campaign", "is a campaign's output"),
        ("other-backend", "merge shards of one campaign"),
        ("missing", "no such folder"),
    ],
)
def test_wrong_input_is_one_error_line(
    cli: Cli, shards: tuple[Path, Path], tmp_path: Path, case: str, message: str
) -> None:
    shard = _copy(shards[0], tmp_path / "s")
    out = tmp_path / "out"
    inputs = [str(shard)]
    if case == "not-output":
        (tmp_path / "empty").mkdir()
        inputs = [str(tmp_path / "empty")]
    elif case == "corrupt":
        (shard / "summary.json").write_text('{"tests": 4, "counts": {')
    elif case == "invalid":
        (shard / "summary.json").write_text('{"tests": "many"}')
    elif case == "out-is-input":
        out = shard
    elif case == "nested":
        out = shard / "merged"
    elif case == "into-campaign":
        out = _copy(shards[1], tmp_path / "other")
    elif case == "other-backend":
        other = _copy(shards[1], tmp_path / "other")
        data = json.loads((other / "summary.json").read_text())
        data["backend"]["version"] = "0.0.1"
        (other / "summary.json").write_text(json.dumps(data))
        inputs.append(str(other))
    elif case == "missing":
        inputs = [str(tmp_path / "nowhere")]
    r = cli("merge", *inputs, "--out", str(out))
    assert r.code == 1
    assert len(r.err_lines) == 1 and "error: " in r.err_lines[0] and message in r.err_lines[0], r.err
    assert "Traceback" not in r.err
    if case != "into-campaign":
        assert not out.exists() or out == shard


def test_shard_ids_tell_slices_of_one_campaign_apart(shards: tuple[Path, Path]) -> None:
    assert shard_id(_summary(shards[0])) == "0/2@0"
    assert shard_id(Summary(seed_first=100)) == "0/1@100"


def test_config_schema_is_the_json_schema_of_fuzzbot_yml(cli: Cli, tmp_path: Path) -> None:
    r = cli("config-schema")
    assert r.code == 0
    schema = json.loads(r.out)
    assert set(schema["properties"]) == set(FuzzConfig.model_fields)
    assert schema["additionalProperties"] is False
    r = cli("config-schema", "--out", str(tmp_path / "schema.json"))
    assert r.code == 0 and r.out == ""
    assert json.loads((tmp_path / "schema.json").read_text()) == schema
    bad = cli("config-schema", "--out", str(tmp_path / "no" / "such" / "dir.json"))
    assert bad.code == 1 and len(bad.err_lines) == 1 and "cannot write" in bad.err


def test_set_aside_cases_are_merged_and_listed(
    cli: Cli, shards: tuple[Path, Path], flaky_shard: Path, tmp_path: Path
) -> None:
    flaky = sorted(p.name for p in (flaky_shard / "flaky").iterdir())
    assert flaky and _summary(flaky_shard).counts["flaky"] >= len(flaky)
    out = tmp_path / "m"
    assert cli("merge", str(shards[0]), str(flaky_shard), "--out", str(out)).code == 2
    assert sorted(p.name for p in (out / "flaky").iterdir()) == flaky
    s = _summary(out)
    assert s.counts["flaky"] == _summary(flaky_shard).counts["flaky"]
    md = (out / "summary.md").read_text()
    assert f"- flaky: {s.counts['flaky']} case(s); {len(flaky)} bundle(s) in [flaky/](flaky/)" in md


def test_a_shard_with_a_store_merges_like_one_without(cli: Cli, shards: tuple[Path, Path], tmp_path: Path) -> None:
    """What the campaign records in its store (every occurrence, the first with its bundle)
    is what merge reads from the bundles of an output that has no store."""
    assert FindingStore.in_dir(shards[0]).path.exists()
    bare = _copy(shards[0], tmp_path / "bare")
    FindingStore.in_dir(bare).path.unlink()
    assert cli("merge", str(shards[0]), str(shards[1]), "--out", str(tmp_path / "with")).code == 2
    assert cli("merge", str(bare), str(shards[1]), "--out", str(tmp_path / "without")).code == 2
    with_store, without = FindingStore.in_dir(tmp_path / "with").all(), FindingStore.in_dir(tmp_path / "without").all()
    assert [(r.fingerprint, r.count, r.bundle, r.nodes) for r in with_store] == [
        (r.fingerprint, r.count, r.bundle, r.nodes) for r in without
    ]


def test_merged_coverage_adds_up_the_opsets_each_shard_drew() -> None:
    """A campaign draws each case's opset; a merge of its shards counts them all."""
    shards = [
        Summary(coverage=CoverageStats(models=3, opsets={"17": 1, "26": 2})),
        Summary(coverage=CoverageStats(models=2, opsets={"26": 2})),
    ]
    merged = merge_summaries(shards)
    assert merged.coverage is not None and merged.coverage.opsets == {"17": 1, "26": 4}


def test_a_summary_written_before_the_first_bad_commit_had_its_name_still_reads() -> None:
    """summary.json called a bisected regression's first bad commit `culprit`, a word that
    also meant the failing side and the guilty rewrite. It is `first_bad` now; a merge or
    report of an older output must still find the commit."""
    old = {"path": "f", "verdict": "wrong_result", "fingerprint": "x", "seed": 1, "signature": "s"}
    ref = FindingRef.model_validate({**old, "culprit": "abc123 kernels: a change"})
    assert ref.first_bad == "abc123 kernels: a change"
    dumped = json.loads(ref.model_dump_json())
    assert dumped["first_bad"] == "abc123 kernels: a change" and "culprit" not in dumped
    assert FindingRef.model_validate(dumped).first_bad == ref.first_bad
