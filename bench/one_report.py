"""One bug, one report: where a real campaign's time goes, and how its findings collapse.

Runs `fuzzbot fuzz` with a config (default examples/ort-regression.yml: onnxruntime
1.30.0 against 1.31.1, each from PyPI in its own cached venv) for `--budget`, then reads
its output folder. Prints one JSON object:

- `seconds`: the campaign's wall time split into fuzzing and reduction (which includes
  the dtype generalization of every reduced trigger);
- `findings`: test cases that were reported (seen), bundles kept, bundles reduced, bundles
  attributed to an earlier bug (folded into duplicates/), and distinct reports left;
- `known`: tests spent on bugs already seen (every sighting after a bug's first) and their
  share of the tests, and the insertions undone because they completed a known trigger;
- `reports`: each report's verdict across builds, signature and reduced size, for a
  person's triage of root causes (which the note states; a script cannot).

`--compare` runs the same campaign twice, with steering off (`known_bugs.avoid: 0`,
`reduce.during: false`: every bug is reduced after the budget) and on (the defaults), and
prints both: the share of the budget known bugs take, before and after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent


def with_steering(config: Path, steer: bool, where: Path) -> Path:
    """A copy of `config` with steering on (its own settings) or off."""
    data = yaml.safe_load(config.read_text()) or {}
    if not steer:
        data["known_bugs"] = {**(data.get("known_bugs") or {}), "avoid": 0.0}
        data["reduce"] = {**(data.get("reduce") or {}), "during": False}
    path = where / ("steered.yml" if steer else "unsteered.yml")
    path.write_text(yaml.safe_dump(data))
    return path


def run_campaign(config: Path, budget: str, out: Path) -> float:
    start = time.monotonic()
    cmd = [sys.executable, "-m", "bot.cli", "fuzz", "--config", str(config), "--budget", budget, "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 2):
        raise SystemExit(f"error: the campaign failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.monotonic() - start


def describe(out: Path, wall: float) -> dict[str, Any]:
    summary = json.loads((out / "summary.json").read_text())
    refs = summary["findings"]
    duplicates = out / "duplicates"
    folded = len(list(duplicates.iterdir())) if duplicates.is_dir() else 0
    reported = sum(n for k, n in summary["counts"].items() if k in ("new_regression", "new_in_head", "persistent"))
    reduction, during = summary["time_s"]["reduction"], summary["time_s"].get("reduction_during", 0.0)
    known_tests = max(reported - len(refs), 0)
    return {
        "tests": summary["tests"],
        "seconds": {
            "wall": round(wall, 1),
            "fuzzing": round(summary["wall_s"] - during, 1),
            "reduction": round(reduction, 1),
            "reduction_while_fuzzing": round(during, 1),
        },
        "known": {
            "tests_on_known_bugs": known_tests,
            "share_of_tests": round(known_tests / max(summary["tests"], 1), 4),
            "steered_insertions": sum(summary.get("steered", {}).values()),
        },
        "findings": {
            "seen": reported,
            "bundles": len(refs) + folded,
            "reduced": sum(1 for r in refs if r.get("reduced_path")) + folded,
            "attributed": folded,
            "distinct_reports": len(refs),
        },
        "reports": [
            {"across": r["across"], "signature": r["signature"][:160], "reduced_nodes": r.get("reduced_nodes")}
            for r in refs
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "examples" / "ort-regression.yml")
    parser.add_argument("--budget", default="300s")
    parser.add_argument("--out", type=Path, help="keep the campaigns' output under here [a temporary folder]")
    parser.add_argument("--compare", action="store_true", help="run with steering off, then on")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuzzbot-bench-") as tmp:
        root = args.out or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        runs = [False, True] if args.compare else [True]
        result = {}
        for steer in runs:
            out = root / ("steered" if steer else "unsteered")
            wall = run_campaign(with_steering(args.config.resolve(), steer, root), args.budget, out)
            result["steered" if steer else "unsteered"] = describe(out, wall)
        print(json.dumps(result if args.compare else result["steered"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
