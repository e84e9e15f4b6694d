"""Time to the first test of a PR check whose base was seen before and whose head is new,
and whether the campaign it runs is the one a cold start runs.

A PR check's base build (and its support probe) is usually cached from an earlier run; its
head is a new build every time. Three two-build onnxruntime campaigns share one cache:

- `earlier`: `--earlier` -> `--base`, the run before, which leaves base's probe (its
  answers and its probe models) in the cache;
- `warm`: `--base` -> `--head`: base from the cache, head new, its probe asked with the
  models kept (bot.sides.probe_models);
- `cold`: `--base` -> `--head` again, into an empty cache: both probed from scratch.

Each runs `--tests` tests from the same seed. Prints JSON: each campaign's `time_s.start`
(from built sides to the first test: workers up, sides checked, support probed), and
whether `warm` and `cold` made the same campaign: the same support, counts and findings.
The goal: `warm` within 30 s, and the same campaign.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from bot.campaign.sides import open_campaign
from bot.config import FuzzConfig
from tests.release_cases import ort_python


def campaign(base: str, head: str, tests: int, out: Path, cache: Path) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    sides = {"base": {"python": str(ort_python(base))}, "head": {"python": str(ort_python(head))}}
    cfg = FuzzConfig.model_validate(
        {
            "backend": "onnxruntime:all",
            "compiler": sides,
            "budget": 3600.0,
            "max_tests": tests,
            "seed": 0,
            "out": str(out),
            "cache_dir": str(cache),
        }
    )
    summary: dict[str, Any] = json.loads(open_campaign(cfg).run().model_dump_json())
    return summary


def same_campaign(a: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    """What must match between two campaigns of one seed: timings and cache hits aside."""
    kept = ("seed", "fingerprint", "signature", "across", "reduced_nodes")
    return {
        "support": a["support"] == b["support"],
        "counts": a["counts"] == b["counts"],
        "findings": [[f[k] for k in kept] for f in a["findings"]] == [[f[k] for k in kept] for f in b["findings"]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--earlier", default="1.29.0")
    parser.add_argument("--base", default="1.30.0")
    parser.add_argument("--head", default="1.31.1")
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--work", type=Path, required=True)
    args = parser.parse_args()
    work = args.work.resolve()
    shutil.rmtree(work / "cache", ignore_errors=True)
    shutil.rmtree(work / "cold-cache", ignore_errors=True)
    earlier = campaign(args.earlier, args.base, 20, work / "earlier", work / "cache")
    warm = campaign(args.base, args.head, args.tests, work / "warm", work / "cache")
    cold = campaign(args.base, args.head, args.tests, work / "cold", work / "cold-cache")
    result = {
        "pair": f"onnxruntime {args.base} -> {args.head}",
        "tests": args.tests,
        "start_s": {
            name: round(s["time_s"]["start"], 1) for name, s in (("earlier", earlier), ("warm", warm), ("cold", cold))
        },
        "same_campaign": same_campaign(warm, cold),
        "findings": len(warm["findings"]),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
