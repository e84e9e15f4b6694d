"""Nothing a run leaves on disk is lost or mixed with another run's: a second campaign into
a folder that holds one is refused before any work, a reduction never replaces a smaller
one, an output path naming a file is one line up front, and a campaign stopped by SIGINT
or SIGTERM (a CI job's cancel or timeout) writes its summary, marked as interrupted. Real
onnxruntime, the real CLI, and real signals sent to a real `fuzzbot fuzz` process."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from bot.findings.store import FindingStore
from bot.findings.summary import Summary
from tests.conftest import CliResult
from tests.paths import ROOT

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

Cli = Callable[..., CliResult]
NO_REDUCE = "reduce:\n  enabled: false\n"


def _files(folder: Path) -> dict[str, str]:
    """Every file under `folder` by its hash: what "nothing changed" compares."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _summary(out: Path) -> Summary:
    return Summary.model_validate_json((out / "summary.json").read_text())


def _fuzz(cli: Cli, out: Path, cache: str, *more: str) -> CliResult:
    args = ["--budget", "60s", "--max-tests", "2", "--no-probe", "--test-fault", "perturb", "--cache-dir", cache]
    return cli("fuzz", "--out", str(out), *args, *more)


def test_a_second_campaign_into_a_folder_with_results_is_refused(cli: Cli, tmp_path: Path, probe_cache: str) -> None:
    out = tmp_path / "out"
    assert _fuzz(cli, out, probe_cache).code == 2
    before = _files(out)
    r = _fuzz(cli, out, probe_cache, "--seed", "100")
    assert r.code == 1 and len(r.err_lines) == 1, r.err
    assert r.err_lines[0].startswith(f"error: --out {out} already holds another run's results")
    assert "give a new --out, or add --force" in r.err_lines[0]
    assert _files(out) == before, "nothing of the first campaign changed"
    forced = _fuzz(cli, out, probe_cache, "--seed", "100", "--force")
    assert forced.code == 2, forced.err
    s = _summary(out)
    assert s.seed_first == 100
    on_disk = {p.name for p in (out / "findings").iterdir()}
    assert on_disk == {Path(f.path).name for f in s.findings}, "no bundle of the first campaign is left"
    assert {r.fingerprint for r in FindingStore.in_dir(out).all()} == {f.fingerprint for f in s.findings}


def test_a_folder_that_only_says_a_campaign_never_started_is_taken(cli: Cli, tmp_path: Path, probe_cache: str) -> None:
    """After `cannot compare` (a side failed to build), the next try needs no --force."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text(Summary(cannot_compare="cannot compare: head: build failed").model_dump_json())
    assert _fuzz(cli, out, probe_cache).code == 2
    assert _summary(out).cannot_compare is None and _summary(out).tests == 2


def test_gen_refuses_a_folder_with_earlier_bundles(cli: Cli, tmp_path: Path) -> None:
    assert cli("gen", "--seed", "1", "--out", str(tmp_path / "g")).code == 0
    before = _files(tmp_path / "g")
    r = cli("gen", "--seed", "2", "--out", str(tmp_path / "g"))
    assert r.code == 1 and len(r.err_lines) == 1 and "seed-1" in r.err and "--force" in r.err, r.err
    assert _files(tmp_path / "g") == before
    assert cli("gen", "--seed", "2", "--out", str(tmp_path / "g"), "--force").code == 0
    assert sorted(p.name for p in (tmp_path / "g").iterdir()) == ["seed-2"]


@pytest.mark.parametrize("command", ["fuzz", "check", "gen", "reduce"])
def test_out_naming_a_file_is_one_line_before_any_work(cli: Cli, tmp_path: Path, command: str) -> None:
    """Before any probe (a fresh cache folder stays unmade) and without touching the file."""
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    cache = tmp_path / "cache"
    model = tmp_path / "seed-0" / "model.onnx"
    assert cli("gen", "--seed", "0", "--out", str(tmp_path), "--nodes", "2").code == 0
    args = {
        "fuzz": ["fuzz", "--out", str(taken), "--cache-dir", str(cache), "--budget", "5s"],
        "check": ["check", str(model), "--out", str(taken)],
        "gen": ["gen", "--out", str(taken)],
        "reduce": ["reduce", str(model.parent), "--out", str(taken)],
    }[command]
    r = cli(*args)
    assert r.code == 1 and len(r.err_lines) == 1, r.err
    assert r.err_lines[0] == f"error: --out {taken} is a file, not a folder; give a folder"
    assert taken.read_text() == "mine\n" and not cache.exists()


def test_a_reduction_never_replaces_a_smaller_one(cli: Cli, tmp_path: Path, probe_cache: str) -> None:
    """The campaign reduces its finding to one node (every model is wrong on a perturbing
    worker); a reduction cut off after one test ends at the original's size and is dropped."""
    assert _fuzz(cli, tmp_path / "out", probe_cache, "--max-tests", "1").code == 2
    ref = _summary(tmp_path / "out").findings[0]
    bundle = tmp_path / "out" / ref.path
    reduced = bundle / "reduced"
    assert ref.reduced_nodes == 1
    before = _files(reduced)
    r = cli("reduce", str(bundle), "--test-fault", "perturb", "--max-tests", "1")
    assert r.code == 0, r.err
    assert f"kept the reduced bundle already at {reduced} (1 node(s))" in r.err
    nodes = len(onnx.load(str(bundle / "model.onnx")).graph.node)
    assert f"this reduction ended at {nodes} node(s), no smaller" in r.err
    assert _files(reduced) == before
    assert sorted(p.name for p in bundle.iterdir()) == sorted(
        ["model.onnx", "inputs.npz", "reference.npz", "finding.json", "repro.py", "reduced"]
    ), "no scratch folder is left behind"


INTERRUPT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_campaign_writes_its_summary_marked_interrupted(
    tmp_path: Path, probe_cache: str, sig: signal.Signals
) -> None:
    config = tmp_path / "fuzzbot.yml"
    config.write_text(NO_REDUCE)
    out = tmp_path / "out"
    args = ["fuzz", "--config", str(config), "--out", str(out), "--budget", "600s", "--no-probe"]
    args += ["--test-fault", "perturb", "--cache-dir", probe_cache]
    # SIGINT as a terminal delivers it: a suite run as a background job of a non-interactive
    # shell passes SIGINT on ignored, and fuzzbot leaves an ignored signal ignored
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 180
        while not _two_findings(out) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, "the campaign ended before it was signalled"
        os.kill(proc.pid, sig)
        # A bound on a hang, not a speed target: in one full run on a loaded machine the
        # campaign took over 120 s from the signal to its exit (cause not found)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == INTERRUPT_CODES[sig], err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert lines == [f"error: interrupted by {sig.name}; the results so far are in {out / 'summary.json'}"], err
    raw = json.loads((out / "summary.json").read_text())
    assert raw["stopped_by"] == sig.name and raw["interrupted"] is True and raw["stopped_at"]
    s = _summary(out)
    assert s.tests >= 2 and s.finding_count >= 2
    assert f"**Interrupted by {sig.name} at {s.stopped_at}**" in (out / "summary.md").read_text()
    kept = {p.name for p in (out / "findings").iterdir() if not p.name.startswith(".")}
    assert kept == {Path(f.path).name for f in s.findings}, "every bundle on disk is listed"


def test_a_campaign_signalled_while_it_probes_writes_its_summary_marked_interrupted(tmp_path: Path) -> None:
    """SIGTERM (a CI job cancelled) while the support probe runs, before any test: a fresh
    probe cache makes the probe run, and the signal comes once it has asked the build's
    opsets and probes what each runs (a slow worker keeps it at that)."""
    config = tmp_path / "fuzzbot.yml"
    config.write_text(NO_REDUCE)
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = ["fuzz", "--config", str(config), "--out", str(out), "--budget", "600s", "--cache-dir", str(cache)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", *args, "--test-fault", "slow"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(cache.glob("support/*-opsets.json")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, "the campaign ended before it was signalled"
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == INTERRUPT_CODES[signal.SIGTERM], err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert lines == [f"error: interrupted by SIGTERM; the results so far are in {out / 'summary.json'}"], err
    s = _summary(out)
    assert s.stopped_by == "SIGTERM" and s.interrupted and s.stopped_at and s.tests == 0
    assert s.backend is not None, "the worker had started"
    assert f"**Interrupted by SIGTERM at {s.stopped_at}**" in (out / "summary.md").read_text()


def _two_findings(out: Path) -> bool:
    """Two findings on disk: bundles of two fingerprints. Two bundles alone may be one finding
    for an instant, while a stronger sighting's bundle is written and before the weaker one
    it supersedes moves to duplicates/ (FindingKeeper.keep)."""
    findings = out / "findings"
    if not findings.is_dir():
        return False
    fingerprints = set()
    for bundle in (b for b in findings.iterdir() if not b.name.startswith(".")):
        try:  # a superseded bundle may move to duplicates/ while it is read
            fingerprints.add(json.loads((bundle / "finding.json").read_text())["fingerprint"])
        except FileNotFoundError:
            continue
    return len(fingerprints) >= 2
