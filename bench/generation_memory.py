"""The process's resident memory over many generated models, with nothing else running:
whether generation itself holds on to memory.

A soak campaign (bench/soak.py) on onnxruntime 1.27.0 -> 1.28.0 peaked at 2.9 GB in the
bot's process, against a goal of 2 GB, and a 150 s campaign's allocated memory grew from
300 MB to 730 MB while it fuzzed. Python's own objects did not grow with it (tracemalloc
saw about 135 MB in all), and allocator settings (one malloc arena, a lower mmap
threshold, malloc_trim) did not change it. Generation alone in one process, with no
backend, judging or reduction, grew the same way: 431 MB per 1,000 models, z3 contexts
held by reference cycles that the collector reached too seldom (generator.z3_contexts).
This bench isolates generation: it
generates `--count` models in this process, as a campaign with no generation processes
does (2 cores: bot.campaign.run.default_processes), and prints the RSS every `--every`
models, the growth per thousand models (a least-squares slope over the samples after the
first, which pays for imports), and how many z3 contexts were taken and are still alive.

    python -m bench.generation_memory [--count 4000] [--every 500]
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import z3

from bench.soak import rss_bytes, slope
from generator.api import GenConfig, generate
from generator.z3_contexts import ContextSupply


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--every", type=int, default=500)
    args = parser.parse_args()
    supply, cfg = ContextSupply(), GenConfig()
    samples: list[dict[str, float]] = []
    failed, began = 0, time.monotonic()
    for seed in range(args.count):
        try:
            generate(seed, cfg, contexts=supply)
        except Exception:  # noqa: BLE001 - a seed that generates nothing is counted, as a campaign drops it
            failed += 1
        if (seed + 1) % args.every == 0:
            rss = round(rss_bytes() / 2**20, 1)
            samples.append({"models": seed + 1, "rss_mb": rss, "contexts_taken": supply.taken})
    gc.collect()
    alive = sum(1 for o in gc.get_objects() if isinstance(o, z3.Context))
    later = samples[1:]
    per_k = slope([s["models"] / 1000 for s in later], [s["rss_mb"] for s in later])
    print(
        json.dumps(
            {
                "models": args.count,
                "failed": failed,
                "seconds": round(time.monotonic() - began, 1),
                "samples": samples,
                "growth_mb_per_1000_models": None if per_k is None else round(per_k, 1),
                "contexts_alive_at_end": alive,
            }
        )
    )


if __name__ == "__main__":
    main()
