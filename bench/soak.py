"""Campaigns back to back in one process, as a long-lived bot runs them: the bot's memory
over them, and whether any died.

Each campaign is `fuzzbot fuzz` at the default config between two pip releases (the pairs
below, round robin), run in this process through the CLI's own entry point, while a thread
samples the process's resident memory every `--every` seconds. Backend workers and helper
processes are not the bot: their memory is their own (capped there) and is not counted.

Prints JSON: per campaign its pair, exit status, tests, the summary's `dropped` and
`onnx_crashes`, the peak RSS during it and the RSS after it; then the peak over all of
them, the growth per campaign (the slope of the RSS after each, fitted over the campaigns
after the first: the first pays for imports and caches), and how many died (an exit other
than 0 or 2, an exception, or no summary.json). The goal (issue 47): peak at most 2 GB, no
growth, none died.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import yaml

PAIRS: dict[str, dict[str, Any]] = {
    "ort-1.27-1.28": {"backend": "onnxruntime:all", "base": ["onnxruntime==1.27.0"], "head": ["onnxruntime==1.28.0"]},
    "ort-1.30-1.31": {"backend": "onnxruntime:all", "base": ["onnxruntime==1.30.0"], "head": ["onnxruntime==1.31.1"]},
    "ort-1.18-1.19": {
        "backend": "onnxruntime:all",
        "base": ["onnxruntime==1.18.1"],
        "head": ["onnxruntime==1.19.0"],
        "packages": ["numpy<2", "ml_dtypes==0.5.4"],
    },
    "ort-1.17-1.18": {
        "backend": "onnxruntime:all",
        "base": ["onnxruntime==1.17.3"],
        "head": ["onnxruntime==1.18.0"],
        "packages": ["numpy<2", "ml_dtypes==0.5.4"],
    },
    "tvm-0.26-0.27": {
        "backend": "tvm",
        "base": ["apache-tvm==0.26.0"],
        "head": ["apache-tvm==0.27.0.post1"],
        "packages": ["numpy==2.4.6", "onnx==1.23.2"],
    },
    "tvm-0.25-0.27": {
        "backend": "tvm",
        "base": ["apache-tvm==0.25.0.post1", "apache-tvm-ffi==0.1.12"],
        "head": ["apache-tvm==0.27.0.post1"],
        "packages": ["numpy==2.4.6", "onnx==1.23.2"],
    },
}


STOPPED = (130, 143)
"""Exit statuses of a campaign ended by SIGINT or SIGTERM: the soak stops with it, as the bot
would, instead of going on in a process whose checkout may have moved."""


def died(code: int | str, summarized: bool) -> bool:
    """Whether a campaign died: an exit other than 0 or 2, an exception, or no summary.json.
    One cut by SIGINT or SIGTERM was stopped (the soak with it) and left no summary by
    design: it is not a death, and a soak stopped early would otherwise always count one."""
    if code in STOPPED:
        return False
    return code not in (0, 2) or not summarized


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Sampler(threading.Thread):
    """The process's RSS every `every_s`, and its peak since the last `reset`."""

    def __init__(self, every_s: float) -> None:
        super().__init__(daemon=True)
        self.every_s = every_s
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            self.peak = max(self.peak, rss_bytes())

    def reset(self) -> None:
        self.peak = rss_bytes()


def config_for(pair: str, budget: str, work: Path) -> Path:
    p = PAIRS[pair]
    raw: dict[str, Any] = {
        "budget": budget,
        "backend": p["backend"],
        "compiler": {
            "packages": p.get("packages", ["numpy==2.4.6"]),
            "base": {"pip": p["base"]},
            "head": {"pip": p["head"]},
        },
        "cache_dir": str(work / "cache"),
    }
    path = work / f"{pair}.yml"
    path.write_text(yaml.safe_dump(raw))
    return path


def one(pair: str, index: int, budget: str, work: Path, sampler: Sampler) -> dict[str, Any]:
    from bot.cli import main as cli

    out = work / f"out-{index:02d}-{pair}"
    shutil.rmtree(out, ignore_errors=True)
    sampler.reset()
    began = time.monotonic()
    try:
        code: int | str = cli(["fuzz", "--config", str(config_for(pair, budget, work)), "--out", str(out)])
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 - a campaign that raises is one that died; the soak goes on
        code = f"{type(e).__name__}: {e}"[:200]
    row: dict[str, Any] = {"pair": pair, "exit": code, "seconds": round(time.monotonic() - began, 1)}
    summary = out / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        row |= {"tests": s["tests"], "dropped": s.get("dropped"), "onnx_crashes": s.get("onnx_crashes")}
    row["died"] = died(code, summary.is_file())
    row["peak_rss_mb"] = round(sampler.peak / 2**20, 1)
    row["rss_after_mb"] = round(rss_bytes() / 2**20, 1)
    return row


def slope(xs: list[float], ys: list[float]) -> float | None:
    """The least-squares slope of ys over xs; None with fewer than two points."""
    if len(xs) < 2:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def growth_mb(after: list[float]) -> float | None:
    """MB per campaign: the slope of the RSS after each, the first left out."""
    per = slope([float(x) for x in range(len(after) - 1)], after[1:])
    return None if per is None else round(per, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--campaigns", type=int, default=20)
    parser.add_argument("--budget", default="5m")
    parser.add_argument("--pairs", default=",".join(PAIRS), help=f"comma-separated, of: {', '.join(PAIRS)}")
    parser.add_argument("--work", type=Path, default=Path(".cache") / "soak")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between RSS samples")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    pairs = args.pairs.split(",")
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        raise SystemExit(f"error: unknown pairs {unknown}; known: {', '.join(PAIRS)}")
    sampler = Sampler(args.every)
    sampler.start()
    rows = []
    for i in range(args.campaigns):
        rows.append(one(pairs[i % len(pairs)], i, args.budget, args.work, sampler))
        print(json.dumps(rows[-1]), flush=True)
        if rows[-1]["exit"] in STOPPED:
            break  # the soak itself was told to stop: a campaign cut by a signal is not a death
    sampler.done.set()
    print(
        json.dumps(
            {
                "campaigns": len(rows),
                "budget": args.budget,
                "peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
                "growth_mb_per_campaign": growth_mb([r["rss_after_mb"] for r in rows]),
                "died": sum(1 for r in rows if r["died"]),
            }
        )
    )


if __name__ == "__main__":
    main()
