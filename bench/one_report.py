"""One bug, one report: where a real campaign's time goes, and how its findings collapse.

Runs `fuzzbot fuzz` with a config (default examples/ort-regression.yml: onnxruntime
1.30.0 against 1.31.1, each from PyPI in its own cached venv) for `--budget`, then reads
its output folder. Prints one JSON object:

- `seconds`: the campaign's wall time split into fuzzing and reduction (which includes
  the dtype generalization of every reduced trigger);
- `findings`: test cases that were reported (seen), bundles kept, bundles reduced, bundles
  attributed to an earlier bug (folded into duplicates/), and distinct reports left;
- `reports`: each report's verdict across builds, signature and reduced size, for a
  person's triage of root causes (which the note states; a script cannot).
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

ROOT = Path(__file__).resolve().parent.parent


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
    reduction = summary["time_s"]["reduction"]
    return {
        "tests": summary["tests"],
        "seconds": {
            "wall": round(wall, 1),
            "fuzzing": round(summary["wall_s"] - reduction, 1),
            "reduction": round(reduction, 1),
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
    parser.add_argument("--out", type=Path, help="keep the campaign's output here [a temporary folder]")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuzzbot-bench-") as tmp:
        out = args.out or Path(tmp) / "out"
        wall = run_campaign(args.config.resolve(), args.budget, out)
        print(json.dumps(describe(out, wall), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
