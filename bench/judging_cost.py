"""Where the budget goes on a buggy compiler: tests per second and the share of the fuzzing
time triage and reductions take, with the judging budget as shipped, unbounded, and off;
and what measuring the converter's own code coverage costs.

A PR campaign on onnx2torch (a real pure-Python converter, from a checkout given as
`--repo`, base `--base` and head `--head`, fuzzed from inside the checkout as the Action runs
it; examples/onnx2torch_backend.py as its plugin) fails on a third of its tests. Three
campaigns of `--budget` each, one after the other, the same seed:

- `bounded`: the default config (oracles.judging_share 0.25);
- `unbounded`: judging takes what it needs (judging_share 1);
- `triage_off`: first runs only (reruns 1, no localization, no reductions while fuzzing);
- `coverage_off` and `coverage_sampled`: `bounded` without head's code coverage, and with
  one seed in four measured: what tracing a pure-Python converter costs.

Prints JSON: per campaign the tests, tests per second, triage and reduction seconds while
fuzzing and their share of the fuzzing time, the runs judging took, and the distinct bugs.
The goal: `bounded` at least half the tests per second of `triage_off`, and triage plus
reduction at most a quarter of its fuzzing time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from bench.mutants import O2T_BACKEND, O2T_PACKAGES

MODES: dict[str, dict[str, Any]] = {
    "bounded": {},
    "unbounded": {"oracles": {"judging_share": 1.0}},
    "triage_off": {"oracles": {"reruns": 1, "localize": False, "judging_share": 1.0}, "reduce": {"during": False}},
    "coverage_off": {"guide": {"code_coverage": False}},
    "coverage_sampled": {"guide": {"coverage_every": 4}},
}


def campaign(repo: Path, base: str, head: str, mode: str, budget: float, work: Path) -> dict[str, Any]:
    from bot.campaign.sides import open_campaign
    from bot.config import FuzzConfig

    out = work / f"out-{mode}"
    shutil.rmtree(out, ignore_errors=True)
    raw: dict[str, Any] = {
        "backend": O2T_BACKEND,
        "compiler": {
            "repo": ".",
            "build": ["pip install --no-deps ."],
            "packages": O2T_PACKAGES,
            "base": {"ref": base},
            "head": {"ref": head},
        },
        "budget": budget,
        "out": str(out),
        "cache_dir": str(work / "cache"),
        "reduce": {"share": 0.0},  # what happens after the budget is not what this measures
    }
    for key, value in MODES[mode].items():
        raw[key] = {**raw.get(key, {}), **value}
    os.chdir(repo)
    summary = open_campaign(FuzzConfig.model_validate(raw)).run()
    t = summary.time_s
    judged = t.triage + t.reduction_during
    return {
        "mode": mode,
        "tests": summary.tests,
        "tests_per_s": round(summary.tests / summary.wall_s, 2) if summary.wall_s else None,
        "triage_s": round(t.triage, 1),
        "reduction_during_s": round(t.reduction_during, 1),
        "judged_share_of_fuzzing": round(judged / summary.wall_s, 3) if summary.wall_s else None,
        "judging": summary.judging.model_dump() if summary.judging else None,
        "distinct": sum(summary.distinct.values()),
        "counts": summary.counts,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="a checkout of onnx2torch's repository")
    parser.add_argument("--base", default="HEAD~2")
    parser.add_argument("--head", default="HEAD")
    parser.add_argument("--budget", type=float, default=300.0)
    parser.add_argument("--modes", default="bounded,unbounded,triage_off,coverage_off")
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = []
    for mode in args.modes.split(","):
        rows.append(campaign(args.repo.resolve(), args.base, args.head, mode, args.budget, args.work.resolve()))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    by = {r["mode"]: r for r in rows}
    result: dict[str, Any] = {"budget_s": args.budget, "campaigns": rows}
    for mode, against in (("triage_off", "bounded_rate_of_triage_off"), ("coverage_off", "coverage_rate_of_off")):
        if "bounded" in by and mode in by and by[mode]["tests_per_s"]:
            result[against] = round(by["bounded"]["tests_per_s"] / by[mode]["tests_per_s"], 2)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
