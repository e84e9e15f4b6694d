"""OUT/summary.md: what a person reads first after a campaign or a merge (a CI job
summary, a PR comment's attachment), rendered from summary.json and the findings store.

The order is the order of urgency: new regressions, then fixed, then persistent bugs,
then what was set aside (flaky, filtered), then what never counted (unsupported,
dropped). The findings table is capped so that a campaign with hundreds of findings
still gives a page one can scroll; the store and summary.json hold the rest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from bot.files import write_whole
from bot.findings.divergence_text import divergence_lines, support_lines
from bot.findings.store import StoredFinding, load_rows
from bot.findings.summary import FindingRef, Summary, rewrites_fired, symbolic_share
from oracles.count_keys import ASIDE_FOLDERS, FILTERED_FOLDER, CountKey
from oracles.sides import CrossVerdict, SideName

SUMMARY_MD = "summary.md"
MAX_ROWS = 200
"""Findings listed in the table; beyond this a line says how many more there are."""
SIGNATURE_CHARS = 70


def _rank(key: str) -> tuple[int, str]:
    return CountKey(key).rank


def _cell(text: str, limit: int | None = None) -> str:
    """Table-safe text: one line, no column breaks, cut at `limit` characters."""
    flat = " ".join(text.split())
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat.replace("\\", "\\\\").replace("|", "\\|").replace("`", "'").replace("<", "&lt;")


def _link(path: str) -> str:
    """A relative link; the text drops the `findings/` every bundle shares, to keep rows short."""
    target = path.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    text = path.removeprefix("findings/") or path
    return f"[{_cell(text)}]({target})"


def _size(row: StoredFinding) -> str:
    if row.nodes is None:
        return "?"
    return f"{row.nodes} nodes" + (" (reduced)" if row.reduced else "")


def origin(raw: Mapping[str, object]) -> str | None:
    """ "shard i/N" or "merged from K shards", from summary.json's `shard` and `merged_from`."""
    merged = raw.get("merged_from")
    if isinstance(merged, list) and merged:
        return f"merged from {len(merged)} shard(s)"
    shard = raw.get("shard")
    return f"shard {shard}" if shard else None


def _header(summary: Summary, where_from: str | None) -> list[str]:
    if summary.base is not None:
        where = [f"base {summary.build(SideName.base)} → head {summary.build(SideName.head)}"]
    else:
        where = [summary.build(SideName.head)] if summary.backend is not None else []
    seeds = f"seeds {summary.seed_first}..{summary.seed_last}" if summary.seed_last is not None else "no seed run"
    where.append(seeds)
    if where_from:
        where.append(where_from)
    distinct = sum(summary.distinct.values())
    occurrences = sum(summary.occurrences.get(r.fingerprint, 0) for r in _listed(summary).values())
    return [
        "# fuzzbot summary",
        "",
        *_interrupted(summary),
        ", ".join(where),
        "",
        f"**{summary.tests} tests** in {summary.wall_s:.1f} s wall time (budget {summary.budget_s:g} s); "
        f"{distinct} distinct finding(s), seen in {occurrences} test(s).",
        "",
    ]


def _interrupted(summary: Summary) -> list[str]:
    """First, so that nobody takes a partial run's counts for a finished one's."""
    if summary.stopped_by is None:
        return []
    when = f" at {summary.stopped_at}" if summary.stopped_at else ""
    return [
        f"**Interrupted by {summary.stopped_by}{when}**: the counts and findings below are those of the"
        " tests run until then, not of the whole budget.",
        "",
    ]


def _listed(summary: Summary) -> dict[str, FindingRef]:
    """The first listed ref of each fingerprint summary.json lists."""
    refs: dict[str, FindingRef] = {}
    for ref in summary.findings:
        refs.setdefault(ref.fingerprint, ref)
    return refs


def _counts(summary: Summary) -> list[str]:
    """Tests by verdict beside the findings (distinct fingerprints) they make: one bug that
    five seeds hit is 5 tests and 1 finding."""
    lines = ["## Verdicts", "", "| verdict | tests | findings |", "|---|---:|---:|"]
    distinct = summary.distinct
    for key in sorted(set(summary.counts) | set(distinct), key=_rank):
        found = (
            str(distinct[key])
            if key in distinct
            else ("0" if CountKey(key).is_bug or key == CrossVerdict.fixed else "")
        )
        lines.append(f"| {_cell(key)} | {summary.counts.get(key, 0)} |" + (f" {found} |" if found else " |"))
    for reason in sorted(summary.dropped):
        lines.append(f"| dropped: {_cell(reason)} | {summary.dropped[reason]} | |")
    if summary.onnx_crashes:  # onnx's own bug, never the system's: each such model read as invalid
        lines.append(f"| onnx's checker crashed (models read as invalid) | {summary.onnx_crashes} | |")
    if summary.reduction_over_bound:  # listed still, each unreduced: the bot's bound, not the system's
        lines.append(f"| findings left unreduced, past the memory bound | | {summary.reduction_over_bound} |")
    if not summary.counts and not summary.dropped:
        lines.append("| (no test ran) | 0 | 0 |")
    return [*lines, "", *_judging(summary)]


def _judging(summary: Summary) -> list[str]:
    """What judged the values, when anything but the torch reference had to, and what the
    optimizer under test did to the models."""
    lines: list[str] = []
    if set(summary.references) - {"torch"}:
        by = ", ".join(f"{k} {v}" for k, v in sorted(summary.references.items()))
        gaps = ", ".join(f"{op} {n}" for op, n in sorted(summary.reference_gaps.items()))
        lines.append(f"References: {by}" + (f" (the torch reference stopped at: {gaps})" if gaps else "") + ".")
    if summary.tiebreaks:
        lines.append(
            "Wrong results confirmed or set aside: "
            + ", ".join(f"{_cell(k)} {v}" for k, v in sorted(summary.tiebreaks.items()))
            + "."
        )
    for line in filter(None, (rewrites_fired(summary.coverage), symbolic_share(summary.coverage))):
        lines.append(_cell(line[0].upper() + line[1:]) + ".")
    if (replay := summary.regressions) is not None:
        back = f": {', '.join(f'`{fp}`' for fp in replay.regressed)} back" if replay.regressed else ""
        lines.append(
            f"Regression corpus: {replay.replayed} known bug(s) replayed in {replay.seconds:.1f} s,"
            f" {len(replay.regressed)} regressed{back}, {len(replay.failing)} still failing,"
            f" {replay.passing} passing; {len(replay.added)} added."
            + (f" {len(replay.skipped)} bundle(s) skipped (unreadable)." if replay.skipped else "")
        )
    if summary.solver_backstops:
        lines.append(
            f"z3 was stopped by its wall-clock backstop {summary.solver_backstops} time(s) while models grew:"
            " those seeds may grow another case on another machine."
        )
    if summary.steered:
        lines.append(
            f"Steered away from {len(summary.steered)} known bug(s): "
            f"{sum(summary.steered.values())} insertion(s) that completed a known trigger were undone."
        )
    if summary.wall_s:
        lines.append(_time_line(summary))
    return [*lines, ""] if lines else []


def _differed(summary: Summary) -> list[str]:
    """Where the two builds differed, and the support head lost or gained (two builds only)."""
    lines = divergence_lines(summary, top=12) + support_lines(summary)
    return ["## Where the builds differed", "", *lines] if lines else []


def _time_line(summary: Summary) -> str:
    """Where the fuzzing time went; the builds' share is their compile and run, beside the
    bot's own work (generation and the reference overlap the builds' requests)."""
    t = summary.time_s
    sides = " and ".join(f"{name} {s:.1f} s" for name, s in t.sides.items()) or f"{t.backend_compute:.1f} s"
    parts = [
        f"generation {t.generation:.1f} s (values {t.values:.1f} s)",
        f"reference {t.reference:.1f} s",
        *([f"corpus {t.corpus:.1f} s"] if t.corpus else []),
        f"inside the builds {sides}",
        f"triage {t.triage:.1f} s" + (f" ({_share(t.triage, summary.wall_s)})" if t.triage else ""),
        f"reduction {t.reduction:.1f} s ({t.reduction_during:.1f} s of it while fuzzing"
        + (f", {_share(t.reduction_during, summary.wall_s)})" if t.reduction_during else ")"),
    ]
    return f"Time: {summary.wall_s:.1f} s of fuzzing; " + ", ".join(parts) + "."


def _share(part: float, whole: float) -> str:
    """`12% of the fuzzing`: what a slow compiler's budget went to besides testing; "" for none."""
    return f"{100 * part / whole:.0f}% of the fuzzing" if whole and part else ""


def _finding_order(row: StoredFinding) -> tuple[tuple[int, str], tuple[int, str], int, str]:
    return _rank(row.across or row.verdict), _rank(row.verdict), -row.count, row.fingerprint


def _first_bad(ref: FindingRef | None) -> str:
    """The first bad commit a bisection named (`SHA subject`), short."""
    if ref is None or not ref.first_bad:
        return ""
    sha, _, subject = ref.first_bad.partition(" ")
    return f"`{sha[:12]}` {_cell(subject, 50)}".rstrip()


def _findings(rows: list[StoredFinding], summary: Summary | None = None) -> list[str]:
    """One row per finding, with the label the store and summary.json share (with one build,
    nothing to compare: the verdict alone) and the first bad commit when bisected."""
    lines = [f"## Findings ({len(rows)})", ""]
    if not rows:
        return [*lines, "No findings.", ""]
    summary = summary or Summary()
    refs = _listed(summary)
    labelled = summary.base is not None or summary.backend is None  # no build named: as the store says
    lines += [
        "| # | fingerprint | verdict | signature | occurrences | smallest model | bundle | first bad commit |",
        "|---:|---|---|---|---:|---:|---|---|",
    ]
    ordered = sorted(rows, key=_finding_order)
    for i, row in enumerate(ordered[:MAX_ROWS], 1):
        shown = labelled and row.across and row.across != row.verdict
        ref = refs.get(row.fingerprint)
        verdict = row.verdict + (f" ({row.across})" if shown else "")
        verdict += f", precision: {ref.precision}" if ref is not None and ref.precision else ""
        bundle = _link(row.smallest) if row.smallest else "(not kept)"
        lines.append(
            f"| {i} | `{row.fingerprint}` | {_cell(verdict)} | {_cell(row.signature, SIGNATURE_CHARS)} "
            f"| {row.count} | {_size(row)} | {bundle} | {_first_bad(ref)} |"
        )
    if len(ordered) > MAX_ROWS:
        lines += ["", f"… and {len(ordered) - MAX_ROWS} more: see findings.sqlite and summary.json."]
    return [*lines, ""]


def _set_aside(summary: Summary, kept: Mapping[str, int]) -> list[str]:
    classes = sorted({k for k in summary.counts if CountKey(k).is_aside} | set(kept), key=_rank)
    if not classes:
        return []
    lines = ["## Set aside (never reported)", ""]
    for key in classes:
        folder = CountKey(key).aside_folder or ""
        n = kept.get(key, 0)
        saved = f"{n} bundle(s) in {_link(folder)}" if n else "no bundle kept"
        lines.append(f"- {_cell(key)}: {summary.counts.get(key, 0)} case(s); {saved}")
    return [*lines, ""]


def render_summary_md(
    summary: Summary,
    store_rows: list[StoredFinding],
    set_aside: Mapping[str, int] | None = None,
    where_from: str | None = None,
) -> str:
    """The Markdown page. `set_aside` maps a class (flaky, perf_regression, filtered:<rule>) to the
    bundles kept on disk for it; `where_from` is `origin(...)`'s line; links are
    relative to the output folder."""
    findings = _findings(store_rows, summary)
    lines = _header(summary, where_from) + _counts(summary) + _differed(summary) + findings
    lines += _set_aside(summary, set_aside or {})
    return "\n".join(lines).rstrip("\n") + "\n"


def kept_aside(out: Path) -> dict[str, int]:
    """Bundles under OUT/flaky/, OUT/perf/ and OUT/filtered/<rule>/, by count key."""
    folders = {key: out / folder for key, folder in ASIDE_FOLDERS.items()}
    filtered = out / FILTERED_FOLDER
    for rule in sorted(filtered.iterdir()) if filtered.is_dir() else []:
        folders[str(CountKey.filtered(rule.name))] = rule
    kept = {key: _bundles_in(folder) for key, folder in folders.items()}
    return {key: n for key, n in kept.items() if n}


def _bundles_in(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(1 for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def write_summary_md(out_dir: Path, summary: Summary | None = None) -> Path:
    """Render OUT/summary.md from OUT/summary.json (`summary` spares re-validating it) and the store,
    written through a temporary file so a reader never sees half a page."""
    raw: dict[str, object] = json.loads((out_dir / "summary.json").read_text())
    if summary is None:
        summary = Summary.model_validate(raw)
    shard = raw.get("shard")
    rows = _this_output(load_rows(out_dir, summary.occurrences, shard if isinstance(shard, str) else None), summary)
    return write_whole(out_dir / SUMMARY_MD, render_summary_md(summary, rows, kept_aside(out_dir), origin(raw)))


def _this_output(rows: list[StoredFinding], summary: Summary) -> list[StoredFinding]:
    """The store's rows of the findings summary.json lists, counted as it counts them: a
    store in a reused output folder also holds earlier campaigns' bugs and sightings."""
    listed = _listed(summary)
    return [
        r.model_copy(update={"count": summary.occurrences.get(r.fingerprint, r.count)})
        for r in rows
        if r.fingerprint in listed
    ]
