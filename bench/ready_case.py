"""Fresh generation of a ready-to-run case, fuzzbot against NNSmith, side by side in one run.

fuzzbot's ready case is what `fuzzbot gen --corpus` makes of one seed: the model grown
with NaN/Inf-free values, its inputs, the torch reference's outputs, and the case written
into a case corpus (bot.cases.corpus), BATCH cases a transaction as `fill_corpus` writes them;
each case is charged an equal share of its batch's write. NNSmith's is its CLI's
generation plus the ONNX export (`bench/nnsmith_gen.py --with-export`), run under its own
venv (`--nnsmith-python`, set up as that script's docstring says) for the same count of
10-node models right after fuzzbot's, on the same machine.

Times are per case, in one warm process on each side: a CLI's start-up (torch's import
alone is seconds) is not a per-case cost, and would make the ratio depend on the count.
Prints one JSON object with both sides' median, p90 and mean, and their ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bot.cases.corpus import Corpus, generator_key
from bot.cases.corpus_feed import BATCH
from bot.cases.making import Prepared, make_case
from generator.api import GenConfig
from generator.coverage import Coverage
from generator.z3_contexts import ContextSupply

NNSMITH_BENCH = Path(__file__).with_name("nnsmith_gen.py")


def stats(times: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(times), 2),
        "p90_ms": round(float(np.percentile(times, 90)), 2),
        "mean_ms": round(statistics.mean(times), 2),
    }


def fuzzbot_side(count: int, nodes: int, first_seed: int) -> dict[str, Any]:
    """Per-case wall ms of make_case plus a share of the batched corpus write."""
    cfg = GenConfig(nodes=nodes)
    key, coverage, contexts = generator_key(cfg), Coverage(), ContextSupply()
    make_case(first_seed + count, cfg, None, Coverage(), None)  # warm-up (lazy imports), untimed
    times: list[float] = []
    parts = {"generation": 0.0, "reference": 0.0, "write": 0.0}
    dropped = 0
    with tempfile.TemporaryDirectory() as folder:
        corpus = Corpus(Path(folder))
        batch: list[Prepared] = []
        pending: list[float] = []
        for seed in range(first_seed, first_seed + count):
            t0 = time.perf_counter()
            made = make_case(seed, cfg, None, coverage, None, contexts)
            pending.append((time.perf_counter() - t0) * 1000)
            parts["generation"] += made.generation_s
            parts["reference"] += made.reference_s
            if made.case is None:
                dropped += 1
            else:
                batch.append(made.case)
            if len(batch) >= BATCH or seed == first_seed + count - 1:
                t1 = time.perf_counter()
                corpus.add(key, batch)
                write_s = time.perf_counter() - t1
                parts["write"] += write_s
                times += [ms + 1000 * write_s / len(pending) for ms in pending]
                batch, pending = [], []
        corpus.close()
    return {
        **stats(times),
        "dropped": dropped,
        "mean_parts_ms": {k: round(1000 * v / count, 2) for k, v in parts.items()},
    }


def nnsmith_side(python: str, count: int, nodes: int, first_seed: int) -> dict[str, Any]:
    command = [python, str(NNSMITH_BENCH), "--count", str(count), "--nodes", str(nodes), "--with-export"]
    done = subprocess.run(
        [*command, "--seed", str(first_seed)], capture_output=True, text=True, check=False, timeout=3600
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: the NNSmith bench failed under {python}: {tail}")
    result: dict[str, Any] = json.loads(done.stdout)
    side: dict[str, Any] = result["per_nodes"][str(nodes)]
    side["nnsmith_version"] = result["nnsmith_version"]
    return side


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=200, help="cases on each side")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="first seed on both sides")
    parser.add_argument("--nnsmith-python", help="the NNSmith venv's interpreter (fuzzbot alone without it)")
    args = parser.parse_args()
    out: dict[str, Any] = {"count": args.count, "nodes": args.nodes}
    out["fuzzbot"] = fuzzbot_side(args.count, args.nodes, args.seed)
    if args.nnsmith_python:
        theirs = out["nnsmith"] = nnsmith_side(args.nnsmith_python, args.count, args.nodes, args.seed)
        mine = out["fuzzbot"]
        out["speedup"] = {k: round(theirs[k] / mine[k], 2) for k in ("median_ms", "p90_ms", "mean_ms")}
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
