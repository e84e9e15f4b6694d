"""Whether one campaign gives the same result in every process, under load, and before and
after a change: the check a restructuring owes (same seed, same cases, verdicts, reports).

A campaign stopped at a test count, with every budget inside it counted in runs, must be a
function of the code and the config alone. Three things it must not follow, each a way it
once did or could: the salt Python gives each process's str hashes (the order a set of
strings is walked in: a tie between two kinds of mutation parent once followed it), the
machine's load (anything timed), and the checkout it runs from, when two checkouts are
meant to behave the same. This runs `fuzzbot fuzz` once per (checkout, salt), all at once
with `--together` (load), and compares each summary.json with the first, timings and cache hits aside.

Prints JSON: each run's counts and findings, the keys that differ from the first run
(with a short excerpt of each side), and `same`; exits 1 when any run differs.

    python -m bench.same_result --config narrow.yml --tests 450 --salts 0,1 --together
    python -m bench.same_result --config ort.yml --tests 300 --checkouts /tmp/before,.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MACHINE = frozenset(
    {"time_s", "wall_s", "memory_bound", "build_s", "found_s", "seconds", "load_s", "order_s", "cached", "perf"}
)
"""summary.json keys the machine decides (seconds, bytes, whether a build or a probe came
from the cache, which two campaigns started at once on a cold cache share out between
them, and the perf check's findings, which are timings: two loads gave two of them): left
out of the comparison."""
MACHINE_KIND = "compile_time"
"""The divergence kind the machine decides (oracles.divergence.DivergenceKind.compile_time)."""
CLI = "import sys; from bot.cli import main; sys.argv[0] = 'fuzzbot'; sys.exit(main(sys.argv[1:]))"


def untimed(value: Any) -> Any:
    """`value` without the keys in MACHINE, at any depth, and without the divergences that
    compile times make (oracles.divergence: reported, never fed to generation; the first
    test's compile on a loaded machine is one)."""
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if k not in MACHINE and k != MACHINE_KIND}
        if kept.get("kind") == MACHINE_KIND:
            return None
        return {k: untimed(v) for k, v in kept.items()}
    if isinstance(value, list):
        return [u for u in (untimed(v) for v in value) if u is not None]
    return value


def differences(first: Any, other: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """The leaf paths where `other` differs from `first`, with both values."""
    if isinstance(first, dict) and isinstance(other, dict):
        for key in sorted(set(first) | set(other)):
            yield from differences(first.get(key), other.get(key), f"{path}.{key}")
    elif isinstance(first, list) and isinstance(other, list) and len(first) == len(other):
        for i, (a, b) in enumerate(zip(first, other, strict=True)):
            yield from differences(a, b, f"{path}[{i}]")
    elif first != other:
        yield path or ".", first, other


def _start(checkout: Path, salt: str, config: Path, out: Path, tests: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONHASHSEED": salt, "PYTHONPATH": str(checkout)}
    args = ["fuzz", "--config", str(config), "--out", str(out), "--max-tests", str(tests), "--budget", "60m"]
    with log.open("wb") as sink:
        # From the config's folder, so that its relative paths (cache_dir) mean one place for every checkout.
        return subprocess.Popen(
            [sys.executable, "-c", CLI, *args], cwd=config.parent, env=env, stdout=sink, stderr=sink
        )


def _brief(summary: dict[str, Any]) -> dict[str, Any]:
    findings = [[f.get("seed"), f.get("fingerprint"), f.get("reduced_nodes")] for f in summary.get("findings", [])]
    return {"tests": summary.get("tests"), "counts": summary.get("counts"), "findings": findings}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help="fuzzbot.yml of the campaign")
    parser.add_argument("--tests", type=int, default=300, help="the test count each campaign stops at")
    parser.add_argument("--salts", default="0,1", help="PYTHONHASHSEED of each run, comma-separated")
    parser.add_argument("--checkouts", default=".", help="fuzzbot checkouts to run from, comma-separated")
    parser.add_argument("--together", action="store_true", help="run every campaign at once (under load)")
    parser.add_argument(
        "--out", type=Path, default=None, help="where the runs' outputs go (default: a temporary folder)"
    )
    args = parser.parse_args()
    runs = [(Path(c).resolve(), s) for c in args.checkouts.split(",") for s in args.salts.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.out or Path(tmp)
        outs = [root / f"run{i}" for i in range(len(runs))]
        started: list[subprocess.Popen[bytes]] = []
        for (checkout, salt), out in zip(runs, outs, strict=True):
            out.mkdir(parents=True, exist_ok=True)
            started.append(_start(checkout, salt, args.config.resolve(), out, args.tests, out / "fuzzbot.log"))
            if not args.together:
                started[-1].wait()
        codes = [p.wait() for p in started]
        if any(code not in (0, 2) for code in codes):
            failed = [o / "fuzzbot.log" for o, code in zip(outs, codes, strict=True) if code not in (0, 2)]
            lines = failed[0].read_text(errors="replace").strip().splitlines()
            said = [line for line in lines if line.startswith("error:")] or lines[-1:] or ["(empty log)"]
            print(f"error: a campaign failed (exit codes {codes}): {said[-1]}", file=sys.stderr)
            return 2
        summaries = [untimed(json.loads((o / "summary.json").read_text())) for o in outs]
    differ = {
        f"{runs[i][0].name or '.'}@{runs[i][1]}": [[p, json.dumps(a)[:120], json.dumps(b)[:120]] for p, a, b in found]
        for i, summary in enumerate(summaries[1:], start=1)
        if (found := list(differences(summaries[0], summary))[:20])
    }
    result = {
        "config": str(args.config),
        "tests": args.tests,
        "together": args.together,
        "runs": [
            {"checkout": str(c), "salt": s, **_brief(summary)} for (c, s), summary in zip(runs, summaries, strict=True)
        ],
        "differences": differ,
        "same": not differ,
    }
    print(json.dumps(result, indent=1))
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main())
