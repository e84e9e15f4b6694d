"""The Markdown the bot posts: the PR comment, issue titles and bodies, and the short
comments (occurrence, status, close). Pure functions of a `Report`, so a dry run shows
exactly what a live run would post, and tests need no server.

Every body starts with its markers (a cut at the end never loses them), clips big parts
(model text, repro) with a pointer to the artifact, and is scrubbed of secrets last.
"""

from __future__ import annotations

from collections.abc import Iterable

from backends.results import BackendInfo
from bot.github.findings import Item, Report
from bot.github.text import (
    CLOSE_MARKER,
    MAX_BODY,
    PR_MARKER,
    REPRO_BEGIN,
    REPRO_END,
    STATUS_MARKER,
    cap_body,
    clean_runs_marker,
    clip,
    fence,
    fingerprint_marker,
    occurrence_marker,
    recurrence_marker,
)

TITLE_CHARS = 120
PART_CHARS = 20_000
"""A model text or repro longer than this is clipped, so one finding cannot crowd out the rest."""
LIST_LINES = 30
"""One-line entries per section of the PR comment; the summary.md has all of them."""


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _build(info: BackendInfo | None) -> str:
    if info is None:
        return "?"
    return f"{info.name} {info.version} ({info.level})" + (f" @ `{info.commit}`" if info.commit else "")


def head_commit(report: Report) -> str:
    """The head build's commit (or version) that a close comment names."""
    s = report.summary
    head = s.sides.get("head")
    if head is not None and head.commit:
        return head.commit
    if s.backend is not None:
        return s.backend.commit or s.backend.version
    return "unknown"


def _details(summary: str, body: str, lang: str, artifact: str, limit: int = PART_CHARS) -> list[str]:
    if not body:
        return [f"*{summary}: not in the output folder.*", ""]
    text, _ = clip(body, limit, artifact)
    return ["<details>", f"<summary>{summary}</summary>", "", fence(text, lang), "", "</details>", ""]


def _repro_block(item: Item, limit: int = PART_CHARS) -> list[str]:
    """repro.py between markers, so auto-close can run it again from the issue alone; a clipped
    repro loses its markers (a partial script must never be run)."""
    artifact = f"{item.bundle}/repro.py"
    if not item.repro:
        return [f"*repro.py: not in the output folder ({artifact}).*", ""]
    text, clipped = clip(item.repro, limit, artifact)
    block = ["<details>", "<summary>repro.py (exits 1 while the bug is present)</summary>", ""]
    if clipped:
        return [*block, fence(text, "python"), "", "</details>", ""]
    return [*block, REPRO_BEGIN, fence(text, "python"), REPRO_END, "", "</details>", ""]


def _localization(item: Item) -> str:
    loc = item.finding.localization if item.finding else None
    if loc is None:
        return "not checked"
    if loc.depends_on_optimization:
        return f"needs the optimizer: passes at level `{loc.level}`"
    return f"also fails at the lowest level `{loc.level}` ({loc.verdict.value})"


def _culprit(item: Item) -> str | None:
    if item.bisect is not None:
        c = item.bisect.get("culprit")
        if isinstance(c, dict) and c.get("sha"):
            return f"`{str(c['sha'])[:12]}` {c.get('subject', '')} ({c.get('author', '')}, {c.get('date', '')})"
        cands = item.bisect.get("candidates")
        if isinstance(cands, list) and cands:
            shas = ", ".join(f"`{str(c.get('sha', ''))[:12]}`" for c in cands[:10] if isinstance(c, dict))
            return f"undecided between {len(cands)} commits: {shas}"
    return item.ref.culprit


def _facts(item: Item) -> list[str]:
    f = item.finding
    rows = [
        ("verdict", item.ref.verdict.value + (f" ({item.across})" if item.across != item.ref.verdict.value else "")),
        ("stage", (f.stage or "?") if f else "?"),
        ("signature", f"`{_one_line(item.ref.signature, 300)}`"),
        ("fingerprint", f"`{item.ref.fingerprint}`"),
        ("head", _build(f.backend if f else None)),
    ]
    if f is not None and f.base_backend is not None:
        rows.append(("base", _build(f.base_backend)))
    if f is not None and f.runs:
        rows.append(("runs", ", ".join(v.value for v in f.runs)))
    rows.append(("optimization", _localization(item)))
    culprit = _culprit(item)
    if culprit:
        rows.append(("first bad commit", culprit))
    rows.append(("seed", str(item.ref.seed)))
    rows.append(("bundle", f"`{item.bundle}`"))
    table = ["| | |", "|---|---|", *(f"| {k} | {v.replace('|', '&#124;')} |" for k, v in rows)]
    message = _one_line(f.message, 500) if f and f.message else ""
    return [*table, "", *([f"> {message}", ""] if message else [])]


def issue_title(item: Item, recurrence: int = 1) -> str:
    """`[fuzzbot] onnxruntime: crash in compile: <normalized message>`, with syzbot's ` (2)` on a recurrence."""
    f = item.finding
    backend = f.backend.name if f else "backend"
    verdict = item.ref.verdict.value
    stage = f" in {f.stage}" if f and f.stage and verdict != "wrong_result" else ""
    suffix = f" ({recurrence})" if recurrence > 1 else ""
    return _one_line(f"[fuzzbot] {backend}: {verdict}{stage}: {item.ref.signature}", TITLE_CHARS - len(suffix)) + suffix


def issue_body(item: Item, report: Report, recurrence: int = 1, previous: int | None = None) -> str:
    lines = [fingerprint_marker(item.ref.fingerprint), recurrence_marker(recurrence), ""]
    verdict = f"**{item.ref.verdict.value}** ({item.across})"
    lines += [f"fuzzbot found a {verdict} that reproduces with a standalone script.", ""]
    if previous is not None:
        lines += [f"This bug was seen before in #{previous}, which was closed; it has come back.", ""]
    lines += _facts(item)
    lines += ["### Reduced model (ONNX text form)", ""]
    lines += _details("model.txt", item.model_text, "text", f"{item.bundle}/model.txt")
    lines += ["### Reproduce", "", "Run it with the interpreter that has the build:", ""]
    lines += _repro_block(item)
    lines += ["*This issue is closed automatically once the repro passes on head in several scheduled runs in a row.*"]
    return cap_body("\n".join(lines) + "\n")


def _regression(item: Item, limit: int) -> list[str]:
    lines = [f"### {item.ref.verdict.value}: `{_one_line(item.ref.signature, 200)}`", ""]
    lines += _facts(item)
    lines += _details("reduced model (ONNX text)", item.model_text, "text", f"{item.bundle}/model.txt", limit)
    lines += _repro_block(item, limit)
    return lines


def _short(items: Iterable[Item]) -> list[str]:
    listed = list(items)
    lines = [
        f"- `{i.ref.fingerprint}` {i.ref.verdict.value}: `{_one_line(i.ref.signature, 120)}` ({i.bundle})"
        for i in listed[:LIST_LINES]
    ]
    if len(listed) > LIST_LINES:
        lines.append(f"- ... and {len(listed) - LIST_LINES} more (see summary.md)")
    return lines


def pr_comment(report: Report) -> str:
    """The sticky PR comment: new regressions in full, then the rest in one line each."""
    s = report.summary
    by: dict[str, list[Item]] = {}
    for item in report.items:
        by.setdefault(item.across, []).append(item)
    regressions = by.get("new_regression", [])
    new_in_head = by.get("new_in_head", [])
    head = [PR_MARKER, "## fuzzbot", ""]
    builds = f"base {_build(s.base)} → head {_build(s.backend)}" if s.base else f"one build: {_build(s.backend)}"
    head += [f"{builds}; {s.tests} tests in {s.wall_s:.0f} s.", ""]
    if s.cannot_compare:
        head += [f"**Could not compare:** {_one_line(s.cannot_compare, 300)}", ""]
    head += [f"**{len(regressions)} new regression(s)**" + (" introduced by this change." if regressions else "."), ""]
    if new_in_head:
        head += [
            f"**{len(new_in_head)} model(s) new in head run wrong**: base declines them, so no regression, "
            "but the change brought them in broken.",
            "",
        ]
    rest = _rest(report, by)
    flagged = regressions + new_in_head
    budget = MAX_BODY - len("\n".join(head + rest)) - 500
    per_part = max(1_000, min(PART_CHARS, budget // max(1, 2 * len(flagged))))
    body: list[str] = []
    for n, item in enumerate(flagged):
        part = _regression(item, per_part)
        if len("\n".join(head + body + part + rest)) > MAX_BODY - 500:
            body += [f"*... {len(flagged) - n} more not shown: see summary.md.*", ""]
            break
        body += part
    return cap_body("\n".join(head + body + rest) + "\n")


def _rest(report: Report, by: dict[str, list[Item]]) -> list[str]:
    counts = report.summary.counts
    lines: list[str] = []
    persistent = "Persistent (also on base)" if report.summary.base else "Bugs of this build (no base to compare)"
    for key, title in (("fixed", "Fixed"), ("persistent", persistent)):
        items = by.get(key, [])
        if items or counts.get(key):
            lines += [f"**{title}: {counts.get(key, len(items))}**", "", *_short(items), ""]
    flaky = counts.get("flaky", 0)
    if flaky or report.flaky:
        extra = [f"- {line}" for line in report.flaky[:LIST_LINES]]
        lines += [f"**Flaky (never counted as a regression): {flaky}**", "", *extra, ""]
    other = {k: n for k, n in counts.items() if k.startswith("filtered:") or k == "perf_regression"}
    if other:
        lines += ["Set aside: " + ", ".join(f"{k} {n}" for k, n in sorted(other.items())), ""]
    return lines


def occurrence_comment(item: Item, report: Report) -> str:
    f = item.finding
    build = _build(f.backend if f else report.summary.backend)
    return (
        f"{occurrence_marker(report.run_id)}\nSeen again by a scheduled run on {build} "
        f"(seed {item.ref.seed}, bundle `{item.bundle}`).\n"
    )


def status_comment(clean: int, close_after: int, commit: str, run_id: str) -> str:
    """The bot's one status comment per issue, edited in place: it holds the auto-close count."""
    if clean == 0:
        text = f"The bug still reproduces on head (`{commit}`): the count of clean runs is back to 0."
    else:
        text = (
            f"The repro passed on head (`{commit}`) in {clean} scheduled run(s) in a row; "
            f"the issue closes after {close_after}."
        )
    return f"{STATUS_MARKER}\n{clean_runs_marker(clean, run_id)}\n{text}\n"


def close_comment(commit: str, close_after: int) -> str:
    return (
        f"{CLOSE_MARKER}\nThe repro has passed on head (`{commit}`) in {close_after} scheduled runs in a row: "
        "closing as fixed. If it comes back, fuzzbot opens a new issue that links this one.\n"
    )
