"""Campaign throughput on onnxruntime with 10-node models, cold and warm.

Cold: every case is generated and its reference computed during the campaign (today's
default). Warm: the campaign replays a case corpus (bot.cases.corpus) built beforehand, untimed,
by the code of `fuzzbot gen --corpus`, with the same generator config.

Prints JSON: tests per second, and where the wall time goes (generation, the reference
and the corpus in the bot process, compile+run inside the worker); warm runs add the
corpus's size on disk and its load time. `--both` runs cold then warm in one process.

Findings are not reduced unless `--reduce` (both modes alike): a reduction runs hundreds
of tests of its own, and a corpus ordered by coverage meets a crash-prone op early, so
reductions would measure the bugs found, not the test loop. `--jobs N` runs N lanes.

`--ceiling` adds the most a campaign could spend inside the system: the worker's own
request handling (decode, compile, read the rewrites, run, encode), called in this process
on the warm corpus's cases with no pipe and no bot, and the share of it spent in compile
and run. Cases that kill a worker are left out (a real worker answers them as crashes).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from backends.adapters.ort import OrtAdapter
from backends.client import WorkerClient
from backends.protocol import encode, read_message
from backends.results import Status
from backends.spec import parse_backend
from backends.worker import Served, handle_run
from bot.campaign.run import Campaign
from bot.cases.corpus import Corpus, generator_key
from bot.cases.corpus_gen import fill_corpus
from bot.config import FuzzConfig, ReduceSettings
from generator.api import GenConfig


def measure(args: argparse.Namespace, corpus: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as out:
        gen = GenConfig(nodes=args.nodes)
        reduce = ReduceSettings(enabled=args.reduce)
        where = {"out": Path(out), "corpus": corpus, "jobs": args.jobs, "reduce": reduce}
        cfg = FuzzConfig(budget=args.budget, seed=args.seed, generator=gen, **where)
        s = Campaign(cfg).run()
    wall = s.wall_s
    t = s.time_s
    result: dict[str, Any] = {
        "backend": f"{s.backend.name} {s.backend.version}" if s.backend else None,
        "nodes": args.nodes,
        "jobs": args.jobs,
        "reduce": args.reduce,
        "tests": s.tests,
        "wall_s": round(wall, 2),
        "tests_per_s": round(s.tests / wall, 2),
        "backend_fraction": round(t.backend_compute / wall, 4),
        "backend_request_fraction": round(t.backend / wall, 4),
        "generation_fraction": round(t.generation / wall, 4),
        "reference_fraction": round(t.reference / wall, 4),
        "corpus_fraction": round(t.corpus / wall, 4),
        "ms_per_test": {
            "generation": round(1000 * t.generation / max(s.tests, 1), 2),
            "reference": round(1000 * t.reference / max(s.tests, 1), 2),
            "corpus": round(1000 * t.corpus / max(s.tests, 1), 2),
            "backend_compute": round(1000 * t.backend_compute / max(s.tests, 1), 2),
        },
        "counts": s.counts,
        "dropped": s.dropped,
    }
    if s.corpus is not None:
        result["corpus"] = s.corpus.model_dump()
    return result


def ensure_corpus(folder: Path, cases: int, nodes: int) -> dict[str, Any]:
    """Fill `folder` up to `cases` cases of this generator key (untimed for the campaign),
    and say how big it is on disk."""
    cfg = GenConfig(nodes=nodes)
    t0 = time.perf_counter()
    filled = fill_corpus(folder, cfg, range(cases))
    built_s = time.perf_counter() - t0
    corpus = Corpus(folder)
    try:
        have, _ = corpus.count(generator_key(cfg))
        size = corpus.size_bytes()
    finally:
        corpus.close()
    return {
        "path": str(folder),
        "cases": have,
        "built_now": filled.added,
        "build_s": round(built_s, 1),
        "size_mb": round(size / 2**20, 2),
        "bytes_per_case": round(size / max(have, 1)),
        "mb_per_10000_cases": round(size / max(have, 1) * 10_000 / 2**20, 1),
    }


def ceiling(folder: Path, nodes: int, count: int = 2000) -> dict[str, Any]:
    """The worker's request handling in this process, on up to `count` corpus cases."""
    corpus = Corpus(folder)
    try:
        index = corpus.index(generator_key(GenConfig(nodes=nodes)))
        cases = [corpus.load(i) for i in list(index.seeds)[:count]]
    finally:
        corpus.close()
    with WorkerClient(parse_backend("onnxruntime")) as client:  # screen out what kills a worker
        cases = [c for c in cases if client.run(c.model_bytes, c.inputs).status is not Status.crash]
    frames = [
        encode({"op": "run", "level": "all", "id": i}, c.inputs, {"model": c.model_bytes}) for i, c in enumerate(cases)
    ]
    served = Served(OrtAdapter({}), None)
    inside = 0.0
    t0 = time.perf_counter()
    for frame in frames:
        header, arrays, blobs = read_message(io.BytesIO(frame))
        reply, outputs = handle_run(served, header, arrays, blobs["model"], None, io.BytesIO())
        encode({"id": header["id"], **reply}, outputs)
        inside += reply.get("compile_s", 0.0) + reply.get("run_s", 0.0)
    wall = time.perf_counter() - t0
    return {
        "requests": len(frames),
        "ms_per_request": round(1000 * wall / len(frames), 3),
        "ms_inside": round(1000 * inside / len(frames), 3),
        "backend_fraction_ceiling": round(inside / wall, 4),
    }


def warm(args: argparse.Namespace) -> dict[str, Any]:
    folder = args.corpus or Path(tempfile.gettempdir()) / f"fuzzbot-corpus-{args.cases}"
    store = ensure_corpus(folder, args.cases, args.nodes)
    result = measure(args, folder)
    result["corpus_store"] = store
    result["corpus_load_s"] = result.get("corpus", {}).get("load_s")
    result["corpus_first_case_s"] = result.get("corpus", {}).get("order_s")
    if args.ceiling:
        result["ceiling"] = ceiling(folder, args.nodes)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of fuzzing")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--cold", action="store_true", help="generate every case (the default)")
    mode.add_argument("--warm", action="store_true", help="replay a case corpus first")
    mode.add_argument("--both", action="store_true", help="cold, then warm, and their ratio")
    parser.add_argument("--corpus", type=Path, help="corpus folder for --warm [TMP/fuzzbot-corpus-N]")
    parser.add_argument("--cases", type=int, default=10_000, help="cases the warm corpus holds")
    parser.add_argument("--jobs", type=int, default=1, help="lanes (a worker each)")
    parser.add_argument("--reduce", action="store_true", help="reduce findings as a campaign does")
    parser.add_argument("--ceiling", action="store_true", help="with --warm/--both: the worker alone, in process")
    args = parser.parse_args()
    if args.both:
        cold_r, warm_r = measure(args), warm(args)
        ratio = warm_r["tests_per_s"] / max(cold_r["tests_per_s"], 1e-9)
        out: dict[str, Any] = {"cold": cold_r, "warm": warm_r, "warm_over_cold": round(ratio, 2)}
    else:
        out = warm(args) if args.warm else measure(args)
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
