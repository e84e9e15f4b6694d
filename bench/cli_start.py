"""How long the command line takes to answer before any work: `--help`, `--version`, a
subcommand's help and a one-line error, each a fresh process as a user runs it.

The commands import what they run only when they run (bot/cli.py, bot/commands/), so these
never import torch, onnx or the generator. Prints JSON: per command the median and the
slowest of `--runs` wall-clock seconds, and whether its exit status was the one expected.
Exits 1 when a help or version answer's median passes `--max-s` (1 s: issue 48's goal).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS: dict[str, tuple[list[str], int]] = {
    "--help": (["--help"], 0),
    "--version": (["--version"], 0),
    "fuzz --help": (["fuzz", "--help"], 0),
    "reduce --help": (["reduce", "--help"], 0),
    "unknown option": (["fuzz", "--no-such-flag"], 1),
}
"""What is asked, and the exit status it must give."""


def _time(args: list[str], runs: int, cwd: Path) -> tuple[list[float], set[int]]:
    seconds: list[float] = []
    codes: set[int] = set()
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "bot.cli", *args], capture_output=True, cwd=cwd, timeout=120)
        seconds.append(time.perf_counter() - began)
        codes.add(done.returncode)
    return seconds, codes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (command, expected) in COMMANDS.items():
            seconds, codes = _time(command, args.runs, Path(tmp))
            results[name] = {
                "median_s": round(statistics.median(seconds), 3),
                "max_s": round(max(seconds), 3),
                "exit_as_expected": codes == {expected},
            }
    slow = [n for n, r in results.items() if r["median_s"] > args.max_s]
    wrong = [n for n, r in results.items() if not r["exit_as_expected"]]
    print(json.dumps({"runs": args.runs, "commands": results, "over_max": slow, "wrong_exit": wrong}, indent=2))
    return 1 if slow or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
