"""When the bot's own process dies of a signal it cannot catch (a campaign died of SIGSEGV
inside onnx's C++ extension and printed nothing), it says where it was, and the Action says
what happened in one line. The death is real: a sitecustomize on PYTHONPATH kills the CLI's
process, and only that one, with SIGSEGV."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT

pytestmark = [pytest.mark.worker, pytest.mark.campaign]


DIE_AT_ONCE = """
import os, signal, sys
if "bot.cli" in sys.orig_argv:
    os.kill(os.getpid(), signal.SIGSEGV)
"""

DIE_WHILE_FUZZING = """
import signal, sys, threading, time
if "bot.cli" in sys.orig_argv:
    main = threading.main_thread().ident

    def fire():
        while "bot.campaign.run" not in sys.modules:
            time.sleep(0.05)
        time.sleep(3.0)
        signal.pthread_kill(main, signal.SIGSEGV)

    threading.Thread(target=fire, daemon=True).start()
"""
"""The signal goes to the main thread, as a fault in the CLI's own C call would, so the stack
that names bot/ holds still while faulthandler walks it. Sent to the whole process, the
timer's thread took it, with the main thread running on under the dump: one CI run's dump
ended after the timer thread's first frame, with no bot/ in it. It is sent 3 s after the
campaign's code is imported, not 4 s after start: on a loaded machine the CLI was still
importing torch at 4 s, and faulthandler's 100 frames of that import held no bot/ frame."""


def _env(tmp: Path, site: str) -> dict[str, str]:
    (tmp / "site").mkdir()
    (tmp / "site" / "sitecustomize.py").write_text(site)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp / "site"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_a_cli_killed_by_sigsegv_prints_the_python_stack_it_died_in(tmp_path: Path, probe_cache: str) -> None:
    env = _env(tmp_path, DIE_WHILE_FUZZING)
    args = ["fuzz", "--budget", "60s", "--no-probe", "--cache-dir", probe_cache, "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "bot.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == -11, done.stderr[-2000:]
    assert "Fatal Python error: Segmentation fault" in done.stderr
    assert "bot/" in done.stderr and "File " in done.stderr, done.stderr[-3000:]  # the stack names our code


def test_the_action_says_in_one_line_that_fuzzbot_died_of_a_signal(tmp_path: Path) -> None:
    env = _env(tmp_path, DIE_AT_ONCE)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env |= {"GITHUB_WORKSPACE": str(workspace), "GITHUB_OUTPUT": str(tmp_path / "github_output")}
    env |= {"INPUT_MODE": "fuzz-only", "INPUT_BACKEND": "onnxruntime", "INPUT_BUDGET": "10s"}
    done = subprocess.run(
        [sys.executable, "-P", "-m", "bot.github.entrypoint"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    out = workspace / "fuzzbot-out"
    assert errors == [
        f"error: fuzzbot died of SIGSEGV; its Python stack is above, and the findings it wrote are in {out}"
    ]
    assert "::error::fuzzbot died of SIGSEGV" in done.stdout
