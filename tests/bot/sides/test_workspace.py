"""Workspaces for real: git worktrees of the toy compiler's history, venvs built by the
recipe, and the toy adapter answering from each build in its own worker process."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from backends.client import WorkerClient
from backends.results import Status
from backends.spec import parse_backend
from bot.sides.config import CompilerConfig
from bot.sides.workspace import (
    BuildFailed,
    BuildLog,
    PreparedSide,
    Workspace,
    WorkspaceError,
    commits_between,
    prepare_side,
)
from oracles.sides import SideName
from oracles.verdict import Verdict, judge
from tests.toy_repo import (
    BACKEND,
    ToyCase,
    ToyRepo,
    build_cache,
    plain_case,
    toy_compiler_config,
    toy_repo,
    trigger_case,
)

pytestmark = [pytest.mark.worker, pytest.mark.release]

__all__ = ["build_cache", "toy_repo"]  # session fixtures shared with test_bisect: each commit is built once


@pytest.fixture(scope="module")
def sides(toy_repo: ToyRepo, build_cache: Path) -> tuple[PreparedSide, PreparedSide]:
    workspace = Workspace(toy_compiler_config(toy_repo, base="fusion", head="docs"), build_cache)
    return workspace.prepare_side(SideName.base), workspace.prepare_side(SideName.head)


def _verdict(python: Path, case: ToyCase, level: str = "O1") -> Verdict:
    spec = parse_backend(BACKEND.rsplit(":", 1)[0] + f":{level}")
    with WorkerClient(spec, str(python)) as client:
        result = client.run(case.model.SerializeToString(), case.inputs)
    assert result.status in (Status.ok, Status.error), result.message
    return judge(result, case.expected, "toy").verdict


def test_two_refs_build_into_two_venvs_where_only_head_has_the_bug(
    sides: tuple[PreparedSide, PreparedSide], toy_repo: ToyRepo
) -> None:
    base, head = sides
    assert (base.commit, head.commit) == (toy_repo.sha("fusion"), toy_repo.sha("docs"))
    assert base.python != head.python and base.python.is_file() and head.python.is_file()
    assert base.label.startswith("base ") and head.label.startswith("head ")
    assert _verdict(base.python, trigger_case()) is Verdict.pass_
    assert _verdict(head.python, trigger_case()) is Verdict.wrong_result
    assert _verdict(head.python, trigger_case(), level="O0") is Verdict.pass_  # the bug needs the fusion pass
    assert _verdict(head.python, plain_case()) is Verdict.pass_  # Mul feeding Add is still fused right


def test_a_second_prepare_comes_from_the_cache_without_rerunning_the_recipe(
    sides: tuple[PreparedSide, PreparedSide], toy_repo: ToyRepo, build_cache: Path
) -> None:
    _, head = sides
    assert head.log is not None
    before = head.log.stat().st_mtime_ns
    start = time.monotonic()
    again = prepare_side(toy_compiler_config(toy_repo, head="docs"), SideName.head, build_cache)
    assert again.cached and time.monotonic() - start < 2.0
    assert again.python == head.python and again.commit == head.commit
    assert head.log.stat().st_mtime_ns == before


def test_an_interrupted_build_is_redone(toy_repo: ToyRepo, build_cache: Path) -> None:
    workspace = Workspace(toy_compiler_config(toy_repo), build_cache)
    first = workspace.prepare_commit(toy_repo.sha("readme"))
    assert first.log is not None
    (first.log.parent / ".complete").unlink()  # as if the process had died before the marker
    second = workspace.prepare_commit(toy_repo.sha("readme"))
    assert not second.cached and (first.log.parent / ".complete").exists()
    assert second.log is not None and "$ pip install --no-build-isolation ." in second.log.read_text()


def test_a_cache_restored_at_another_path_is_rebuilt_not_trusted(
    toy_repo: ToyRepo, build_cache: Path, tmp_path: Path
) -> None:
    """A restored cache (actions/cache on another runner's path) holds venvs that name their
    first folder: the commit's venv reads its packages through a `.pth` file there. Trusted,
    the side would run the first folder's packages, or none once that folder is gone."""
    cfg = toy_compiler_config(toy_repo)
    sha = toy_repo.sha("fusion")
    first = Workspace(cfg, build_cache).prepare_commit(sha)
    assert first.shared is not None
    restored = tmp_path / "restored"
    for folder in (first.root, first.shared):
        assert folder is not None
        shutil.copytree(folder, restored / "builds" / folder.name, symlinks=True)
    said: list[str] = []
    side = Workspace(cfg, restored, say=said.append).prepare_commit(sha)
    assert not side.cached and side.python.is_relative_to(restored)
    assert any("made at another path" in line for line in said)
    where = subprocess.run(
        [str(side.python), "-c", "import numpy, toycc; print(numpy.__file__); print(toycc.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(Path(line).is_relative_to(restored) for line in where.stdout.split()), where.stdout
    assert Workspace(cfg, restored).prepare_commit(sha).cached  # built here now: trusted


def test_two_builders_of_one_commit_build_it_once(toy_repo: ToyRepo, build_cache: Path) -> None:
    """The lock: a second process (here a thread with its own Workspace) waits, then reuses the build."""
    sha = toy_repo.sha("div")
    cfg = toy_compiler_config(toy_repo)
    with ThreadPoolExecutor(2) as pool:
        sides = list(pool.map(lambda _: Workspace(cfg, build_cache).prepare_commit(sha), [0, 1]))
    assert sorted(s.cached for s in sides) == [False, True]
    assert sides[0].python == sides[1].python


def test_a_side_that_fails_to_build_names_the_command_and_the_log(toy_repo: ToyRepo, build_cache: Path) -> None:
    cfg = toy_compiler_config(toy_repo, head="broken")
    with pytest.raises(BuildFailed) as e:
        prepare_side(cfg, SideName.head, build_cache)
    message, log = str(e.value), e.value.log
    assert "\n" not in message and log is not None
    assert message.startswith(f"head {toy_repo.sha('broken')}"[:17])
    assert "`pip install --no-build-isolation .` exited with code" in message and str(log) in message
    text = log.read_text()
    assert "$ pip install --no-build-isolation ." in text and "Unclosed array" in text  # pip's TOML error
    with pytest.raises(BuildFailed) as again:  # a failure is retried by default...
        prepare_side(cfg, SideName.head, build_cache)
    assert not again.value.cached
    built = log.stat().st_mtime_ns
    with pytest.raises(BuildFailed) as known:  # ...or, when asked, reported from the record
        Workspace(cfg, build_cache, retry_failed=False).prepare_side(SideName.head)
    assert known.value.cached and str(known.value) == message and log.stat().st_mtime_ns == built


def test_a_failed_build_shows_its_log_s_last_lines_before_the_one_error(toy_repo: ToyRepo, tmp_path: Path) -> None:
    """The terminal says a build started and where its log is, and on failure the log's tail
    (pip's own error here) above the one error line: no one opens a log to learn why."""
    lines: list[str] = []
    workspace = Workspace(toy_compiler_config(toy_repo, head="broken"), tmp_path / "cache", say=lines.append)
    with pytest.raises(BuildFailed) as e:
        workspace.prepare_side(SideName.head)
    assert lines[0] == f"head {toy_repo.sha('broken')[:12]}: building (log: {e.value.log})"
    assert lines[1].startswith("compiler.packages (numpy onnx setuptools wheel): building (log: ")  # shared, first
    tail = lines[2:]
    assert tail and all(line.startswith("  | ") for line in tail)
    assert any("Unclosed array" in line for line in tail), tail  # pip's TOML error, from the log
    assert tail[-1] == f"  | {(e.value.log or Path()).read_text().splitlines()[-1]}"


def test_a_long_build_step_says_so_with_the_log_s_last_line(tmp_path: Path) -> None:
    """A line every `every_s` with what the log last says: the echo, for every tick in the
    sleep after it. A tick may also land before the shell echoes (the log's last line is
    then the command BuildLog wrote) or after the last echo, before the step exits."""
    lines: list[str] = []
    log = BuildLog(tmp_path / "build.log", "head main: build failed", 60.0, lines.append, "head main", every_s=0.3)
    command = "echo '[1/2] compiling kernels.cc'; sleep 1.2; echo '[2/2] linking'"
    start = time.monotonic()
    log.run(command, tmp_path)
    elapsed = time.monotonic() - start
    said = [re.fullmatch(r"head main: building, \d+s so far: (.*)", x) for x in lines]
    assert said and all(said), lines
    last = [m.group(1) for m in said if m]
    assert last.count("[1/2] compiling kernels.cc") >= 2, "each tick in the sleep reads the echo"
    assert set(last) <= {"[1/2] compiling kernels.cc", f"$ {command}", "[2/2] linking"}, lines
    assert len(lines) <= elapsed / 0.3 + 1, "one line a tick, not more"
    assert "[2/2] linking" in (tmp_path / "build.log").read_text()


def test_unknown_refs_and_missing_repos_are_one_line(toy_repo: ToyRepo, tmp_path: Path) -> None:
    recipe = toy_compiler_config(toy_repo).model_dump()
    cfg = CompilerConfig.model_validate({**recipe, "head": {"ref": "no-such-branch"}})
    with pytest.raises(WorkspaceError, match=r"^unknown ref 'no-such-branch' in "):
        prepare_side(cfg, SideName.head, tmp_path)
    assert Workspace(cfg, tmp_path).resolve("origin/main") == toy_repo.sha("docs")  # as CI names it
    gone = CompilerConfig.model_validate({**cfg.model_dump(), "repo": str(tmp_path / "nowhere")})
    with pytest.raises(WorkspaceError, match=r"^cannot clone compiler.repo .*nowhere"):
        prepare_side(gone, SideName.base, tmp_path)


def test_python_and_pip_sides(toy_repo: ToyRepo, build_cache: Path) -> None:
    cfg = CompilerConfig.model_validate(
        {**toy_compiler_config(toy_repo).model_dump(), "base": {"python": sys.executable}, "head": {"pip": ["numpy"]}}
    )
    base = prepare_side(cfg, SideName.base, build_cache)
    assert base.python == Path(sys.executable) and base.commit is None and base.log is None
    head = prepare_side(cfg, SideName.head, build_cache)
    assert head.commit is None and head.label == "head numpy" and head.python.is_file()
    assert prepare_side(cfg, SideName.head, build_cache).cached


def test_commits_between_lists_the_range_oldest_first(toy_repo: ToyRepo) -> None:
    commits = commits_between(toy_repo.path, toy_repo.sha("fusion"), toy_repo.sha("docs"))
    names = ["readme", "div", "broken", "fixbuild", "bug", "docs"]
    assert [c.sha for c in commits] == [toy_repo.sha(n) for n in names]
    assert commits[4].subject == "kernels: simplify the fused multiply-add"
    assert commits[4].author == "Toy Dev <dev@toycc.test>" and commits[4].date.startswith("2026-01-")
    with pytest.raises(WorkspaceError, match="not an ancestor"):
        commits_between(toy_repo.path, toy_repo.sha("docs"), toy_repo.sha("wip_fix"))


def test_a_build_never_sees_a_token(
    toy_repo: ToyRepo, build_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report job rebuilds head with its GitHub token in the environment; the recipe runs
    the compiler's own code and must not get it, whatever the variable is called."""
    for name in ("GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "MY_PYPI_PASSWORD"):
        monkeypatch.setenv(name, "ghs_" + "x" * 36)
    seen = tmp_path / "build-env.txt"
    cfg = toy_compiler_config(toy_repo).model_copy(update={"build": [f"env > {seen}"]})
    side = Workspace(cfg, build_cache).prepare_side(SideName.head)
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert "ghs_" + "x" * 36 not in seen.read_text()
    assert env["VIRTUAL_ENV"] == str(side.python.parent.parent)


def test_a_side_gets_what_its_backends_worker_imports_unless_the_user_pinned_it() -> None:
    """TVM's ONNX frontend imports onnx inside the worker: a TVM side built from pip specs
    alone once failed with "No module named 'onnx'" until the user added it to packages."""
    from bot.campaign.sides import with_worker_requirements

    tvm_sides = CompilerConfig(base={"pip": ["apache-tvm==0.25.0"]}, head={"pip": ["apache-tvm==0.27.0"]})
    assert "onnx" not in tvm_sides.packages
    assert with_worker_requirements(tvm_sides, parse_backend("tvm:O0")).packages == [*tvm_sides.packages, "onnx"]
    assert with_worker_requirements(tvm_sides, parse_backend("openvino")).packages[-1] == "onnx"
    assert with_worker_requirements(tvm_sides, parse_backend("onnxruntime")) == tvm_sides  # it needs nothing more
    pinned = tvm_sides.model_copy(update={"packages": ["numpy==2.4.6", "ONNX==1.17.0"]})
    assert with_worker_requirements(pinned, parse_backend("tvm")).packages == ["numpy==2.4.6", "ONNX==1.17.0"]
