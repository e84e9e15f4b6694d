"""Regression-corpus replay: how long judging `--count` reduced findings takes before fuzzing.

The corpus is made of small generated models (1 to `--max-nodes` nodes, what reductions
leave), written as bundles the way a campaign adds its reduced findings. The replay is a
real campaign's (`fuzzbot fuzz --regressions`) on onnxruntime: each bundle's reference is
computed afresh, every side runs it, and triage judges it. Prints JSON: the replay's
seconds, per bundle, and the verdicts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bot.campaign.run import Campaign
from bot.config import FuzzConfig
from bot.findings.bundle import write_bundle
from generator.api import GenConfig, generate
from generator.values import NoValidValues


def build(folder: Path, count: int, max_nodes: int) -> int:
    """Write `count` small bundles named like fingerprints; returns how many seeds it took."""
    seed = made = 0
    while made < count:
        seed += 1
        try:
            case = generate(seed, GenConfig(nodes=1 + seed % max_nodes))
        except (NoValidValues, RuntimeError):
            continue
        write_bundle(folder / f"{seed:016x}", case.model, case.inputs, None)
        made += 1
    return seed


def replay(folder: Path, out: Path, backend: str) -> dict[str, Any]:
    cfg = FuzzConfig(backend=backend, budget=600, out=out, regressions=folder, max_tests=1)
    t0 = time.perf_counter()
    summary = Campaign(cfg).run()
    wall = time.perf_counter() - t0
    replayed = summary.regressions
    assert replayed is not None
    return {
        "backend": f"{summary.backend.name} {summary.backend.version}" if summary.backend else backend,
        "bundles": replayed.replayed,
        "replay_s": replayed.seconds,
        "ms_per_bundle": round(1000 * replayed.seconds / max(replayed.replayed, 1), 2),
        "campaign_wall_s": round(wall, 2),
        "still_failing": len(replayed.failing),
        "passing": replayed.passing,
        "skipped": len(replayed.skipped),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100, help="reduced findings in the corpus")
    parser.add_argument("--max-nodes", type=int, default=6)
    parser.add_argument("--backend", default="onnxruntime:all")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "regressions"
        build(folder, args.count, args.max_nodes)
        result = replay(folder, Path(tmp) / "out", args.backend)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
