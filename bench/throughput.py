"""Campaign throughput on onnxruntime with 10-node models.

Prints JSON: tests per second, and where the wall time goes (generation and the
reference in the bot process, compile+run inside the worker).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from bot.campaign import Campaign
from bot.config import FuzzConfig
from generator.api import GenConfig


def measure(budget_s: float, nodes: int, seed: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as out:
        cfg = FuzzConfig(budget=budget_s, seed=seed, out=Path(out), generator=GenConfig(nodes=nodes))
        s = Campaign(cfg).run()
    wall = s.wall_s
    t = s.time_s
    return {
        "backend": f"{s.backend.name} {s.backend.version}" if s.backend else None,
        "nodes": nodes,
        "tests": s.tests,
        "wall_s": round(wall, 2),
        "tests_per_s": round(s.tests / wall, 2),
        "backend_fraction": round(t.backend_compute / wall, 4),
        "backend_request_fraction": round(t.backend / wall, 4),
        "generation_fraction": round(t.generation / wall, 4),
        "reference_fraction": round(t.reference / wall, 4),
        "ms_per_test": {
            "generation": round(1000 * t.generation / max(s.tests, 1), 2),
            "reference": round(1000 * t.reference / max(s.tests, 1), 2),
            "backend_compute": round(1000 * t.backend_compute / max(s.tests, 1), 2),
        },
        "counts": s.counts,
        "dropped": s.dropped,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of fuzzing")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    json.dump(measure(args.budget, args.nodes, args.seed), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
