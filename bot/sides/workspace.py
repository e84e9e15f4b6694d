"""Workspaces: a checkout and a built venv for each side (or commit) of the compiler under test.

Layout under `cache_dir`:

    repos/<digest>.git           one mirror clone of compiler.repo, fetched once per Workspace
    builds/packages-<digest>/    a venv holding compiler.packages, shared by every build
    builds/<sha12>-<digest>/     a commit's build: checkout-<sha12>/ (git worktree), venv/, build.log
    builds/pip-<digest>/         a pip side's venv, keyed by its requirement list (and index)
    builds/wheel-<digest>/       a wheel side's venv, keyed by the wheels' bytes
    artifacts/<repo>-<id>/       a GitHub Actions artifact's files, keyed by its id (bot.sides.artifact)

A commit's venv is created without pip and layered over the shared packages venv by a
`.pth` file, so numpy (or torch) is installed once rather than once per commit, while
whatever the recipe installs lands in, and shadows from, the commit's own venv. `pip`
in that venv is a shim for `python -m pip`, which installs into the venv that runs it.

Every build is keyed by what determines it (commit, recipe, packages, interpreter),
runs under a file lock so two processes never build the same folder, and is trusted
only once its `.complete` marker, written last, exists and names the folder it was built
in: an interrupted build is redone, and so is one a moved cache carried to another path.
A failed build leaves its log and a `.failed` marker, and is retried unless the
Workspace is told to trust recorded failures.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from packaging.tags import Tag, sys_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from bot.credentials import without_credentials
from bot.errors import UserError
from bot.files import file_lock
from bot.sides.artifact import ArtifactError, fetch_artifact, wheel_glob
from bot.sides.config import CompilerConfig, SideSpec
from oracles.sides import SideName

COMPLETE = ".complete"
FAILED = ".failed"
BUILD_TIMEOUT_S = 3600.0


class WorkspaceError(UserError):
    """A repository, ref or side that cannot be used; the message is one line."""


class BuildFailed(WorkspaceError):
    """A side's environment or build recipe failed; the message names the command and the log."""

    def __init__(self, message: str, log: Path | None, cached: bool = False) -> None:
        super().__init__(message)
        self.log = log
        self.cached = cached
        """True when this is a failure recorded earlier, not retried (`retry_failed=False`)."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str
    date: str
    """ISO 8601 author date."""

    @property
    def short(self) -> str:
        return self.sha[:12]


@dataclass(frozen=True)
class PreparedSide:
    python: Path
    """The interpreter a worker for this side runs under."""
    commit: str | None
    """Full SHA for a side built from a ref; None for pip and python sides."""
    label: str
    log: Path | None
    """The build log (None for a python side, which is not built here)."""
    seconds: float = 0.0
    """Time spent preparing it now: near zero when it came from the cache."""
    cached: bool = False
    root: Path | None = None
    """The folder that holds this side's build and nothing else's (its venv, its worktree);
    None for a python side, whose build fuzzbot did not make."""
    shared: Path | None = None
    """The shared packages venv layered under the side's own (numpy, onnx, ...)."""

    @property
    def build_id(self) -> str:
        """What identifies the build for caches: commit and recipe, or the pip spec (the
        build folder's name), or the interpreter's path for a python side."""
        return self.root.name if self.root is not None else f"python-{digest(str(self.python))}"


def digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:10]


def wheel_files(given: str, which: SideName) -> list[Path]:
    """The wheels a `wheel:` side names (a file, a folder, a glob) that this interpreter can
    install: a CI's dist/ folder holds a wheel per Python version and platform, and pip
    refuses a list that holds one it cannot install."""
    path = Path(given).expanduser()
    if path.is_dir():
        found = sorted(path.glob("*.whl"))
    elif path.is_file():
        found = [path]
    else:
        found = sorted(Path(p) for p in glob.glob(str(path), recursive=True))
    wheels = [w.resolve() for w in found if w.is_file() and w.suffix == ".whl"]
    if not wheels:
        raise WorkspaceError(f"{which}: wheel {given}: no .whl file there")
    ours = list(sys_tags())
    takes = set(ours)
    usable = [w for w in wheels if _wheel_tags(w, which) & takes]
    if not usable:
        names = ", ".join(w.name for w in wheels)
        raise WorkspaceError(f"{which}: wheel {given}: none of {names} installs on this Python ({ours[0]})")
    return usable


def _wheel_tags(wheel: Path, which: SideName) -> frozenset[Tag]:
    try:
        return parse_wheel_filename(wheel.name)[3]
    except InvalidWheelFilename as e:
        raise WorkspaceError(f"{which}: wheel {wheel}: not a wheel's file name ({e})") from e


def git(cwd: Path, *args: str, timeout_s: float = 600.0) -> str:
    """stdout of a git command; its failure is a WorkspaceError with git's last message line."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WorkspaceError(f"git {args[0]}: {e}") from e
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.strip().splitlines() if ln.strip()] or [f"exit code {done.returncode}"]
        raise WorkspaceError(f"git {args[0]} in {cwd}: {lines[-1].strip()}")
    return done.stdout.strip()


LOG_FORMAT = "%H%x1f%s%x1f%an <%ae>%x1f%aI"


def _commits(lines: str) -> list[Commit]:
    return [Commit(*line.split("\x1f", 3)) for line in lines.splitlines() if line]


def commits_between(repo: Path, good: str, bad: str) -> list[Commit]:
    """Commits after `good` up to and including `bad`, oldest first, along the first-parent
    chain of `bad` (as `git bisect --first-parent`): a merged branch counts as its merge."""
    if subprocess.run(["git", "merge-base", "--is-ancestor", good, bad], cwd=repo, capture_output=True).returncode:
        raise WorkspaceError(f"{good[:12]} is not an ancestor of {bad[:12]}: no range to search (swapped?)")
    args = ["log", "--reverse", "--first-parent", "--ancestry-path", f"--format={LOG_FORMAT}", f"{good}..{bad}"]
    return _commits(git(repo, *args))


def describe(repo: Path, sha: str) -> Commit:
    return _commits(git(repo, "log", "-1", f"--format={LOG_FORMAT}", sha))[0]


def _build_env(venv: Path) -> dict[str, str]:
    """The environment of an activated venv. The bot's own PYTHONPATH is not passed on, nor
    anything named like a credential: a report job rebuilds head with its GitHub token in
    the environment, and a build runs the compiler's own code."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")
    env = {k: v for k, v in without_credentials(os.environ).items() if k not in dropped}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


Say = Callable[[str], None]
"""Where a build's progress lines go (the terminal of `fuzzbot fuzz`); each is one line."""

PROGRESS_EVERY_S = 60.0
"""A build that runs longer than this says so this often: a 40-minute C++ build that
printed nothing until it ended looked like a hang."""

TAIL_LINES = 15
"""Lines of a failed build's log shown before its one error line."""


def _quiet(line: str) -> None:
    """Say nothing: a caller with no terminal (bisection, the Action's head build)."""


class BuildLog:
    """Runs commands into one log file, says which one failed, and, while one runs long,
    what it last wrote."""

    def __init__(
        self,
        path: Path,
        what: str,
        timeout_s: float,
        say: Say = _quiet,
        label: str = "",
        every_s: float = PROGRESS_EVERY_S,
    ) -> None:
        self.path = path
        self.what = what
        self.timeout_s = timeout_s
        self.say = say
        self.label = label or what
        self.every_s = every_s
        self.start = time.monotonic()
        path.write_text("")

    def run(self, command: str | list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
        shown = command if isinstance(command, str) else " ".join(command)
        with open(self.path, "a") as log:
            log.write(f"$ {shown}\n")
            log.flush()
            try:
                code = self._wait(command, cwd, env, log)
            except subprocess.TimeoutExpired:
                raise self._failed(shown, f"timed out after {self.timeout_s:g}s") from None
            except OSError as e:
                raise self._failed(shown, str(e.strerror or e)) from e
            log.write(f"[exit {code}]\n")
        if code != 0:
            raise self._failed(shown, f"exited with code {code}")

    def _wait(self, command: str | list[str], cwd: Path, env: dict[str, str] | None, log: IO[str]) -> int:
        """The command's exit code; every `every_s` a line with the log's last line."""
        proc = subprocess.Popen(
            command,
            shell=isinstance(command, str),
            cwd=cwd,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                try:
                    return proc.wait(timeout=max(0.0, min(self.every_s, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline:
                        raise
                    last = next(iter(reversed(self.tail(1))), "")
                    self.say(f"{self.label}: building, {time.monotonic() - self.start:.0f}s so far: {last[:160]}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def tail(self, lines: int) -> list[str]:
        """The log's last non-empty lines (read from its last 64 KiB: a build log can be large)."""
        with open(self.path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 65536))
            text = f.read().decode(errors="replace")
        return [line for line in text.splitlines() if line.strip()][-lines:]

    def _failed(self, command: str, why: str) -> BuildFailed:
        """The one error line, after the log's last lines (indented, so no line reads as
        an error of its own)."""
        for line in self.tail(TAIL_LINES):
            self.say(f"  | {line[:300]}")
        return BuildFailed(f"{self.what}: `{command}` {why} (log: {self.path})", self.path)


class Workspace:
    """Checkouts and builds of one compiler config's repository, cached under `cache_dir`."""

    def __init__(
        self,
        cfg: CompilerConfig,
        cache_dir: Path,
        python: str = sys.executable,
        timeout_s: float = BUILD_TIMEOUT_S,
        retry_failed: bool = True,
        say: Say = _quiet,
    ) -> None:
        """`retry_failed=False` reuses a recorded build failure instead of building again: a
        bisection rerun need not spend another long failing build on a commit known broken;
        a campaign retries, since its failure may have been the network's."""
        self.cfg = cfg
        self.cache_dir = cache_dir.resolve()
        self.python = python
        self.timeout_s = timeout_s
        self.retry_failed = retry_failed
        self.say = say
        """A line when a build starts, while it runs long, and its log's tail when it fails."""
        self._mirror: Path | None = None

    # -- the repository ---------------------------------------------------------------

    def mirror(self) -> Path:
        """The mirror clone of compiler.repo, cloned on first use and fetched once per Workspace."""
        if self._mirror is not None:
            return self._mirror
        if not self.cfg.repo:
            raise WorkspaceError("compiler.repo is not set: a side given by ref needs it")
        source = self.cfg.repo
        if Path(source).expanduser().exists():
            source = str(Path(source).expanduser().resolve())
        mirror = self.cache_dir / "repos" / f"{digest(source)}.git"
        with file_lock(mirror.with_suffix(".lock")):
            if (mirror / COMPLETE).exists():
                git(mirror, "fetch", "--quiet", "--prune", "origin")
            else:
                shutil.rmtree(mirror, ignore_errors=True)
                mirror.parent.mkdir(parents=True, exist_ok=True)
                try:
                    git(mirror.parent, "clone", "--quiet", "--mirror", source, str(mirror))
                except WorkspaceError as e:
                    raise WorkspaceError(f"cannot clone compiler.repo {self.cfg.repo}: {e}") from e
                (mirror / COMPLETE).write_text(source + "\n")
        self._mirror = mirror
        return mirror

    def resolve(self, ref: str) -> str:
        """The full SHA of `ref` (branch, tag, or SHA prefix) in compiler.repo."""
        mirror = self.mirror()
        # The mirror has the remote's branches as its own: CI's `origin/main` is `main` here.
        for name in (ref, ref.removeprefix("origin/")):
            try:
                return git(mirror, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
            except WorkspaceError:
                continue
        raise WorkspaceError(f"unknown ref {ref!r} in {self.cfg.repo}")

    def commits_between(self, good: str, bad: str) -> list[Commit]:
        return commits_between(self.mirror(), self.resolve(good), self.resolve(bad))

    def describe(self, ref: str) -> Commit:
        return describe(self.mirror(), self.resolve(ref))

    # -- sides ------------------------------------------------------------------------

    def prepare_side(self, which: SideName) -> PreparedSide:
        side: SideSpec = getattr(self.cfg, which)
        if side.python:
            python = Path(side.python).expanduser()
            if not (python.is_file() and os.access(python, os.X_OK)):
                raise WorkspaceError(f"{which}: python {side.python} is not an executable file")
            return PreparedSide(python, None, f"{which} {side.label}", None, cached=True)
        if side.pip:
            index = ["--index-url", side.index] if side.index else []
            return self.prepare_pip([*index, *side.pip], f"{which} {side.label}")
        if side.wheel:
            return self.prepare_wheels(wheel_files(side.wheel, which), which)
        if side.artifact:
            try:
                folder = fetch_artifact(side.artifact, self.cache_dir, which)
            except ArtifactError as e:
                raise WorkspaceError(str(e)) from e
            return self.prepare_wheels(wheel_files(wheel_glob(folder), which), which)
        assert side.ref is not None
        sha = self.resolve(side.ref)
        named = side.ref if not sha.startswith(side.ref) else ""
        return self.prepare_commit(sha, f"{which} {named} ({sha[:12]})" if named else f"{which} {sha[:12]}")

    def prepare_commit(self, sha: str, label: str | None = None) -> PreparedSide:
        """A venv with the build of commit `sha` (a full SHA), built by the recipe unless cached."""
        label = label or sha[:12]
        root = self.cache_dir / "builds" / f"{sha[:12]}-{self._recipe_digest()}"
        checkout = root / f"checkout-{sha[:12]}"

        def build(log: BuildLog) -> None:
            with file_lock(self.mirror().with_suffix(".lock")):
                git(self.mirror(), "worktree", "prune")
                git(self.mirror(), "worktree", "add", "--quiet", "--force", "--detach", str(checkout), sha)
            self._layered_venv(root / "venv", log)
            env = _build_env(root / "venv")
            for command in self.cfg.build:
                log.run(command, checkout, env)

        what = f"{label}: build failed" if sha[:12] in label else f"{label}: build of {sha[:12]} failed"
        return self._rooted(self._cached(root, what, label, sha, build), root)

    def prepare_pip(self, requirements: list[str], label: str) -> PreparedSide:
        root = self.cache_dir / "builds" / f"pip-{digest(*requirements, self._packages_digest())}"

        def build(log: BuildLog) -> None:
            self._layered_venv(root / "venv", log)
            log.run([str(root / "venv" / "bin" / "python"), "-m", "pip", "install", *requirements], root)

        side = self._cached(root, f"{label}: installing {' '.join(requirements)} failed", label, None, build)
        return self._rooted(side, root)

    def prepare_wheels(self, wheels: list[Path], which: SideName) -> PreparedSide:
        """A venv with wheels a CI built, keyed by their bytes: a CI that rebuilds into the
        same path (dist/*.whl on every PR) gets a new venv, never the last PR's build."""
        hashes = [f"{w.name}:{hashlib.sha256(w.read_bytes()).hexdigest()}" for w in wheels]
        root = self.cache_dir / "builds" / f"wheel-{digest(*hashes, self._packages_digest())}"
        label = f"{which} {', '.join(w.name for w in wheels)}"

        def build(log: BuildLog) -> None:
            self._layered_venv(root / "venv", log)
            log.run([str(root / "venv" / "bin" / "python"), "-m", "pip", "install", *map(str, wheels)], root)

        side = self._cached(root, f"{label}: installing the wheels failed", label, None, build)
        return self._rooted(side, root)

    # -- building ---------------------------------------------------------------------

    def _rooted(self, side: PreparedSide, root: Path) -> PreparedSide:
        packages = self.cache_dir / "builds" / f"packages-{self._packages_digest()}"
        return replace(side, root=root, shared=packages)

    def _recipe_digest(self) -> str:
        return digest(*self.cfg.build, "--", self._packages_digest())

    def _packages_digest(self) -> str:
        return digest(*self.cfg.packages, "--", self.python, sys.version)

    def _cached(
        self, root: Path, what: str, label: str, sha: str | None, build: Callable[[BuildLog], None]
    ) -> PreparedSide:
        """`build` into `root` under its lock, unless a completed build is already there."""
        start = time.monotonic()
        python = root / "venv" / "bin" / "python"
        with file_lock(root.with_name(root.name + ".lock")):
            if _built_here(root):
                return PreparedSide(python, sha, label, root / "build.log", time.monotonic() - start, cached=True)
            if (root / COMPLETE).exists():
                self.say(f"{label}: the cached build was made at another path (a moved or restored cache): rebuilding")
            if (root / FAILED).exists() and not self.retry_failed:
                raise BuildFailed((root / FAILED).read_text().strip(), root / "build.log", cached=True)
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            self.say(f"{label}: building (log: {root / 'build.log'})")
            try:
                build(BuildLog(root / "build.log", what, self.timeout_s, self.say, label))
            except BuildFailed as e:
                (root / FAILED).write_text(f"{e}\n")
                raise
            (root / COMPLETE).write_text(f"{os.path.abspath(root)}\n{label}\n")
        return PreparedSide(python, sha, label, root / "build.log", time.monotonic() - start)

    def _layered_venv(self, venv: Path, log: BuildLog) -> None:
        """A pip-less venv that sees the shared packages venv through a .pth file."""
        base = self._packages_venv()
        log.run([self.python, "-m", "venv", "--without-pip", str(venv)], venv.parent)
        site = _site_packages(venv / "bin" / "python")
        (site / "_fuzzbot_packages.pth").write_text(str(_site_packages(base / "bin" / "python")) + "\n")
        for name in ("pip", "pip3"):
            shim = venv / "bin" / name
            shim.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -m pip "$@"\n')
            shim.chmod(0o755)

    def _packages_venv(self) -> Path:
        """The shared venv holding compiler.packages (and pip), built once per package list."""
        root = self.cache_dir / "builds" / f"packages-{self._packages_digest()}"
        what = f"installing compiler.packages ({' '.join(self.cfg.packages)}) failed"

        def build(log: BuildLog) -> None:
            log.run([self.python, "-m", "venv", str(root / "venv")], root)
            pip = [str(root / "venv" / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
            log.run([*pip, *self.cfg.packages], root)

        label = f"compiler.packages ({' '.join(self.cfg.packages)})"
        return self._cached(root, what, label, None, build).python.parent.parent


def _built_here(root: Path) -> bool:
    """Whether `root` holds a completed build made at this very path. A venv names its own
    folder in absolute paths (a layered venv's `.pth`, its scripts' first lines, a worktree's
    `.git` file), so a cache copied or restored elsewhere would run another folder's packages,
    or none: such a build is redone, not trusted."""
    marker = root / COMPLETE
    return marker.exists() and marker.read_text().split("\n", 1)[0] == os.path.abspath(root)


def _site_packages(python: Path) -> Path:
    """The purelib folder of the venv whose interpreter is `python`, asked of that interpreter
    only when our own layout guess is absent (same minor version, so the guess usually holds)."""
    venv = python.parent.parent
    guess = venv / Path(sysconfig.get_path("purelib")).relative_to(sysconfig.get_path("data"))
    if guess.is_dir():
        return guess
    ask = [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    out = subprocess.run(ask, capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def prepare_side(cfg: CompilerConfig, which: SideName, cache_dir: Path) -> PreparedSide:
    """The interpreter for one side of a campaign, built (or found in the cache) as needed."""
    return Workspace(cfg, cache_dir).prepare_side(which)
