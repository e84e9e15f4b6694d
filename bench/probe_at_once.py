"""Two new builds' support probes, one after the other and at once (bot.campaign.probing).

A campaign between two builds that no earlier run probed (two pip releases, two wheels, a
first PR run) asks both everything before its first test. TVM answers each pair by
compiling a model, about a second a pair. This probes `--base` and `--head` into a fresh
cache in turn, then into another fresh cache at once, and prints JSON: the seconds each
way, the pairs each build was asked, and whether both ways gave the same answers and the
same failures in the same order.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from backends.client import WorkerClient
from backends.spec import parse_backend
from bot.campaign.probing import Asking, probe_at_once, probe_in_turn
from bot.campaign.side_setup import SideSetup
from bot.campaign.triage import Side
from bot.sides.probe import ProbeFailure, SupportMatrix


def _probe(
    args: argparse.Namespace, cache: Path, at_once: bool
) -> tuple[float, list[dict[int, SupportMatrix]], list[ProbeFailure]]:
    spec = parse_backend(args.backend)
    low, high = (int(x) for x in args.opsets.split("-"))
    opsets = list(range(low, high + 1))
    ops = args.ops.split(",") if args.ops else None
    failures: list[ProbeFailure] = []
    with WorkerClient(spec, args.base, 30.0) as base, WorkerClient(spec, args.head, 30.0) as head:
        lane = [Side("base", base), Side("head", head)]
        setups = [SideSetup(s.name, spec, s.client.python, build_id=s.name) for s in lane]
        asking = Asking(setups, lane, opsets, cache, {}, ops)
        began = time.perf_counter()
        if at_once:
            found = probe_at_once(asking, failures.append, None)
        else:
            found = probe_in_turn(asking, failures.append, None, None)
        return time.perf_counter() - began, found, failures


def _asked(m: SupportMatrix) -> int:
    """The op x dtype pairs a matrix answers: run or declined (a failed pair stays among
    those run, bot.sides.probe.probe_opsets)."""
    return sum(len(by_dtype) for kind in (m.supported, m.unsupported) for by_dtype in kind.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="python of the first build")
    parser.add_argument("--head", required=True, help="python of the second build")
    parser.add_argument("--backend", default="tvm")
    parser.add_argument("--opsets", default="20-21", help="the range probed, e.g. 18-21")
    parser.add_argument("--ops", default="", help="comma-separated op types (default: every op)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        turn_s, turn, turn_failed = _probe(args, Path(tmp) / "in-turn", at_once=False)
        once_s, once, once_failed = _probe(args, Path(tmp) / "at-once", at_once=True)
    pairs = [sum(_asked(m) for m in side.values()) for side in turn]
    result = {
        "backend": args.backend,
        "opsets": args.opsets,
        "pairs_per_build": pairs,
        "in_turn_s": round(turn_s, 1),
        "at_once_s": round(once_s, 1),
        "speedup": round(turn_s / once_s, 2) if once_s else None,
        "same_answers": turn == once,
        "same_failures": turn_failed == once_failed,
    }
    print(json.dumps(result, indent=2))
    return 0 if result["same_answers"] and result["same_failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
