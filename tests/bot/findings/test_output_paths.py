"""An output folder read from anywhere: relative `--out` (the README's default
`fuzzbot-out`), another working folder, and after a move, as a downloaded artifact is."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

pytestmark = [pytest.mark.worker, pytest.mark.campaign]

Cli = Callable[..., CliResult]


def _comment(cli: Cli, out: str, dry: Path) -> str:
    r = cli("report", out, "--mode", "pr", "--pr", "7", "--repo", "toy/toycc", "--dry-run", str(dry))
    assert r.code in (0, 2), r.err
    (comment,) = sorted(dry.glob("*.md"))
    return comment.read_text()


def test_a_relative_output_folder_reads_from_anywhere_and_after_a_move(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["--max-tests", "6", "--budget", "60s", "--no-probe", "--test-fault", "perturb"]
    r = cli("fuzz", "--out", "fuzzbot-out", *args)
    assert r.code == 2, r.err
    summary = json.loads((work / "fuzzbot-out" / "summary.json").read_text())
    assert summary["findings"] and all(f["path"].startswith("findings/") for f in summary["findings"])
    here = _comment(cli, "fuzzbot-out", tmp_path / "dry1")
    assert "not in the output folder" not in here, here
    assert "(findings/" in here and "fuzzbot-out/" not in here  # bundles named inside the folder
    moved = tmp_path / "artifact" / "downloaded"
    shutil.move(str(work / "fuzzbot-out"), str(moved))
    monkeypatch.chdir(tmp_path)
    there = _comment(cli, "artifact/downloaded", tmp_path / "dry2")
    assert there == here
    merged = cli("merge", "artifact/downloaded", "--out", "merged")
    assert merged.code == 2, merged.err
    data = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert all((tmp_path / "merged" / f["path"] / "finding.json").is_file() for f in data["findings"])
    assert "not in the output folder" not in _comment(cli, "merged", tmp_path / "dry3")
