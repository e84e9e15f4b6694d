"""What a new build's support probe costs before its first test, with the probe's models
kept from an earlier build (bot.sides.probe_models) and without.

A PR check's base is usually cached from an earlier run, and its head is a new build every
time, so head's probe is what every PR pays. This probes one build (`--base`) into a fresh
cache, then a second (`--head`) twice: into that cache, where the probe's models are kept,
and into an empty one, where they are drawn again. Both are asked the same models; the
answers must agree. Prints JSON: seconds per probe, pairs asked, and whether the second
build's matrices match between the two ways.
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
from bot.sides.probe import SupportMatrix, probe_opsets


def _probe(python: str, opsets: list[int], cache: Path, build_id: str) -> tuple[float, dict[int, SupportMatrix]]:
    with WorkerClient(parse_backend("onnxruntime:all"), python, 30.0) as client:
        assert client.info is not None
        began = time.perf_counter()
        found = probe_opsets(client, client.info, opsets, cache, lambda failure: None, build_id=build_id)
        return time.perf_counter() - began, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="python of the first build (onnxruntime)")
    parser.add_argument("--head", required=True, help="python of the second build (onnxruntime)")
    parser.add_argument("--opsets", default="11-21", help="the range probed, e.g. 11-21")
    args = parser.parse_args()
    low, high = (int(x) for x in args.opsets.split("-"))
    opsets = list(range(low, high + 1))
    with tempfile.TemporaryDirectory() as tmp:
        shared, empty = Path(tmp) / "shared", Path(tmp) / "empty"
        base_s, base = _probe(args.base, opsets, shared, "base")
        kept_s, kept = _probe(args.head, opsets, shared, "head")
        drawn_s, drawn = _probe(args.head, opsets, empty, "head")
    pairs = sum(len(m.supported) + len(m.unsupported) for m in base.values())
    same = all(kept[o].supported == drawn[o].supported and kept[o].unsupported == drawn[o].unsupported for o in opsets)
    result = {
        "opsets": args.opsets,
        "ops_known_per_opset_sum": pairs,
        "base_probe_s": round(base_s, 1),
        "head_probe_models_kept_s": round(kept_s, 1),
        "head_probe_models_drawn_s": round(drawn_s, 1),
        "speedup": round(drawn_s / kept_s, 2) if kept_s else None,
        "same_answers": same,
    }
    print(json.dumps(result, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
