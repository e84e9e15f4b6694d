"""What measuring a compiler's own Python code costs: the same campaign with head's code
coverage off, on, and sampled, in tests per second.

One-build campaigns (`--backend`, default TVM, whose Relax ONNX frontend is Python) of
`--tests` tests each, the same seed, one after the other and then again in the other order
(`--rounds`), so that a machine's load falls on every mode alike. Prints JSON: per mode the
tests per second of each round and their median, the runs measured, and the ratio of `on`
and `sampled` to `off`. The goal: `on` at least half of `off`; where it is not, `sampled`
(guide.coverage_every) is what a campaign should run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

MODES: dict[str, dict[str, Any]] = {
    "off": {"code_coverage": False},
    "on": {"code_coverage": True},
    "sampled": {"code_coverage": True, "coverage_every": 4},
}


def campaign(backend: str, python: str | None, mode: str, tests: int, seed: int, work: Path) -> dict[str, Any]:
    from bot.campaign.run import Campaign
    from bot.config import FuzzConfig

    out = work / f"out-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    cfg = FuzzConfig(
        backend=backend,
        python=python,
        max_tests=tests,
        budget=3600,
        seed=seed,
        out=out,
        cache_dir=work / "cache",
        guide=MODES[mode],
        reduce={"enabled": False},
    )
    summary = Campaign(cfg).run()
    code = summary.code_coverage
    return {
        "tests_per_s": round(summary.tests / summary.wall_s, 2),
        "measured": code.measured if code else 0,
        "arcs": code.arcs if code else 0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="tvm")
    parser.add_argument("--python", default=None, help="the interpreter that has the backend (default: this one)")
    parser.add_argument("--tests", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
            for mode in order:
                runs[mode].append(campaign(args.backend, args.python, mode, args.tests, args.seed, work))
                print(json.dumps({"round": r, "mode": mode, **runs[mode][-1]}), file=sys.stderr, flush=True)
    rate = {m: statistics.median(x["tests_per_s"] for x in rows) for m, rows in runs.items()}
    result = {
        "backend": args.backend,
        "tests": args.tests,
        "modes": {m: {"tests_per_s": rate[m], "rounds": rows} for m, rows in runs.items()},
        "on_of_off": round(rate["on"] / rate["off"], 2) if rate["off"] else None,
        "sampled_of_off": round(rate["sampled"] / rate["off"], 2) if rate["off"] else None,
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
