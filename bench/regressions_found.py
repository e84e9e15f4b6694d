"""Known regressions and fixes a PR check should find: guidance off against on, side by side.

For each pair of consecutive releases that holds a known flip (tests/known_flips.py), run N
campaigns (seeds) per mode under the same budget, the way `fuzzbot fuzz` runs them:

- `off`: plain generation (guide: divergence, mutation, hint and code coverage all off);
- `on`: divergence feedback, mutation, the diff hint and head's code coverage (fuzzbot's defaults);
- `nohint`: divergence and mutation, without the hint (to show what the hint adds).

One campaign per pair and seed serves every flip of that pair, and stops once it has found
them all. A finding is a flip's bug when it carries the flip's label and its model holds the
flip's trigger as a subgraph (generator.avoid's matching); once the campaign is over, the
finding's reduced model must hold the trigger too, or the claim is dropped (a reduction that
drifted onto another bug). The time is when the first such finding was kept (`found_s`).

Prints JSON: per flip and mode, the share of campaigns that found it within 2 minutes and
within the budget, and the median time to the first finding (null when half or more missed);
per mode, the share of flips found and the median over flips. `--nightly` adds one-build
campaigns on onnxruntime with guidance on and off: distinct bugs per hour, as the campaign
counts them and as reduced findings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import onnx

from bot.campaign.sides import open_campaign
from bot.campaign.state import CampaignState
from bot.config import FuzzConfig, GuideSettings, ReduceSettings
from bot.errors import UserError
from bot.findings.known_bugs import holds
from bot.findings.summary import FindingRef, in_output
from bot.sides.config import CompilerConfig
from tests.known_flips import FLIPS, NARROW, Flip, pairs
from tests.narrow_repo import BACKEND, narrow_compiler_config, shared_narrow_repo
from tests.release_cases import ort_python

MODES = {
    "off": GuideSettings(divergence=False, mutation=False, hint=False, code_coverage=False),
    "on": GuideSettings(),
    "nohint": GuideSettings(hint=False),
}
EARLY_S = 120.0


def _is(flip: Flip, ref: FindingRef, out: Path, reduced: bool) -> bool:
    path = ref.reduced_path if reduced else ref.path
    if ref.across != flip.label or path is None:
        return False
    model = in_output(out, path) / "model.onnx"
    return model.is_file() and holds(onnx.load(str(model)), [flip.trigger])


def _config(system: str, base: str, head: str, work: Path) -> tuple[str, CompilerConfig]:
    if system == NARROW:
        return BACKEND, narrow_compiler_config(shared_narrow_repo(work / "narrow"), base, head)
    sides = {"base": {"python": str(ort_python(base))}, "head": {"python": str(ort_python(head))}}
    return "onnxruntime:all", CompilerConfig.model_validate(sides)


def campaign(
    flips: list[Flip], backend: str, compiler: CompilerConfig, mode: str, seed: int, budget: float, work: Path
) -> dict[str, Any]:
    """One campaign on one pair; which flips it found, when, and what it did."""
    out = work / f"out-{flips[0].base}-{flips[0].head}-{mode}-{seed}"
    cfg = FuzzConfig(
        backend=backend,
        compiler=compiler,
        budget=budget,
        seed=seed,
        out=out,
        cache_dir=work / "cache",
        guide=MODES[mode],
        reduce=ReduceSettings(budget=30.0, share=0.25, max_findings=30),
    )
    found: dict[str, float] = {}
    looked: set[int] = set()
    run = open_campaign(cfg)

    def watch(state: CampaignState) -> None:
        for ref in state.kept.findings:
            if id(ref) in looked:
                continue
            looked.add(id(ref))
            for flip in flips:
                if flip.name not in found and _is(flip, ref, out, reduced=False):
                    found[flip.name] = ref.found_s if ref.found_s is not None else budget
        if len(found) == len(flips):
            run.stop()

    t0 = time.monotonic()
    summary = run.run(on_test=watch)
    verified = {}
    for name, at in found.items():
        flip = next(f for f in flips if f.name == name)
        refs = [r for r in summary.findings if _is(flip, r, out, reduced=False)]
        reduced = [r for r in refs if r.reduced_path is not None]
        if not reduced or any(_is(flip, r, out, reduced=True) for r in reduced):
            verified[name] = at
    return {
        "mode": mode,
        "seed": seed,
        "found": verified,
        "dropped": sorted(set(found) - set(verified)),
        "tests": summary.tests,
        "fuzz_s": round(summary.wall_s, 1),
        "total_s": round(time.monotonic() - t0, 1),
        "distinct": summary.distinct,
    }


def _median(times: list[float | None]) -> float | None:
    """The median time, a miss counting as later than any hit; None when half or more missed."""
    hits = sorted(t for t in times if t is not None)
    if 2 * len(hits) <= len(times):
        return None
    ranked = hits + [float("inf")] * (len(times) - len(hits))
    return round(statistics.median(ranked), 1)


def report(runs: list[dict[str, Any]], flips: list[Flip], modes: list[str], budget: float) -> dict[str, Any]:
    per_flip: dict[str, Any] = {}
    for flip in flips:
        row: dict[str, Any] = {"pair": f"{flip.system} {flip.base} -> {flip.head}", "label": flip.label}
        for mode in modes:
            mine = [r for r in runs if r["mode"] == mode and r["pair"] == (flip.system, flip.base, flip.head)]
            times = [r["found"].get(flip.name) for r in mine]
            row[mode] = {
                "campaigns": len(mine),
                "within_2m": round(sum(1 for t in times if t is not None and t <= EARLY_S) / max(len(mine), 1), 2),
                "within_budget": round(sum(1 for t in times if t is not None) / max(len(mine), 1), 2),
                "median_s": _median(times),
                "times": [round(t, 1) if t is not None else None for t in times],
            }
        per_flip[flip.name] = row
    overall: dict[str, Any] = {}
    for mode in modes:
        ran = [f for f in flips if per_flip[f.name][mode]["campaigns"]]  # a pair that could not start is no miss
        medians = [per_flip[f.name][mode]["median_s"] for f in ran]
        found = [per_flip[f.name][mode]["within_budget"] for f in ran]
        finite = sorted(m for m in medians if m is not None)
        regressions = [f for f in ran if f.label == "new_regression"]
        overall[mode] = {
            "flips_measured": len(ran),
            "flips_found_share": round(sum(found) / max(len(found), 1), 2),
            "flips_found_in_majority": sum(1 for m in medians if m is not None),
            "median_of_medians_s": round(statistics.median(finite), 1) if finite else None,
            "regressions_found_share": round(
                sum(per_flip[f.name][mode]["within_budget"] for f in regressions) / max(1, len(regressions)), 2
            ),
        }
    return {"budget_s": budget, "flips": per_flip, "overall": overall}


def nightly(seeds: int, budget: float, work: Path, modes: list[str]) -> dict[str, Any]:
    """One-build campaigns on onnxruntime:all, guidance on and off: distinct bugs per hour,
    as the campaign counts them and as reduced bugs. The campaign's count holds each finding
    left unreduced under its own name, so a campaign that floods (one bug under many
    unreduced names) scores high on it; reduced bugs are named by what caused them. Side by
    side means one process per mode at once (`--modes on` beside `--modes off`), so both run
    under the same load."""
    result: dict[str, Any] = {}
    for mode in modes:
        distinct, reduced, tests = [], [], []
        for seed in range(seeds):
            out = work / f"nightly-{mode}-{seed}"
            cfg = FuzzConfig(budget=budget, seed=1000 * seed, out=out, cache_dir=work / "cache", guide=MODES[mode])
            summary = open_campaign(cfg).run()
            distinct.append(sum(n for k, n in summary.distinct.items()))
            reduced.append(sum(1 for r in summary.findings if r.reduced_path is not None))
            tests.append(summary.tests)
        result[mode] = {
            "tests": tests,
            "distinct": distinct,
            "reduced": reduced,
            "per_hour": round(3600 * statistics.mean(distinct) / budget, 1),
            "reduced_per_hour": round(3600 * statistics.mean(reduced) / budget, 1),
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds of fuzzing per campaign")
    parser.add_argument("--seeds", type=int, default=3, help="campaigns per pair and mode")
    parser.add_argument("--modes", default="off,on", help="comma-separated: off, on, nohint")
    parser.add_argument("--flips", default="", help="comma-separated flip names (default: all; none: only --nightly)")
    parser.add_argument(
        "--half",
        choices=("tune", "report", "all"),
        default="report",
        help="the flips of one half (tests/known_flips.py: guidance is tuned on `tune`, measured on `report`)",
    )
    parser.add_argument("--nightly", type=float, default=0.0, help="seconds per one-build campaign (0: none)")
    parser.add_argument("--work", type=Path, default=None, help="keep campaigns here (default: a temp folder)")
    args = parser.parse_args()
    modes = args.modes.split(",")
    chosen = set(args.flips.split(",")) - {"none"} if args.flips else {f.name for f in FLIPS}
    measured = [f for f in FLIPS if f.name in chosen and (args.half == "all" or f.half == args.half)]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        runs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []  # campaigns that could not start: not counted as misses
        for (system, base, head), flips in pairs(None if args.half == "all" else args.half).items():
            flips = [f for f in flips if f.name in chosen]
            if not flips:
                continue
            backend, compiler = _config(system, base, head, work)
            for seed in range(args.seeds):
                for mode in modes:
                    try:
                        done = campaign(flips, backend, compiler, mode, 1000 * seed, args.budget, work)
                    except UserError as e:  # a side that cannot be had: the other pairs still run
                        errors.append(
                            {"pair": f"{system} {base} -> {head}", "mode": mode, "seed": seed, "error": str(e)}
                        )
                        print(json.dumps(errors[-1]), file=sys.stderr, flush=True)
                        continue
                    done["pair"] = (system, base, head)
                    runs.append(done)
                    print(json.dumps({k: v for k, v in done.items() if k != "pair"}), file=sys.stderr, flush=True)
        result = report(runs, measured, modes, args.budget)
        result["errors"] = errors
        result["half"] = args.half
        if args.nightly:
            result["nightly"] = nightly(args.seeds, args.nightly, work, modes)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
