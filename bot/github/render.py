"""The Markdown the bot posts: the PR comment, issue titles and bodies, and the short
comments (occurrence, status, close). Pure functions of a `Report`, so a dry run shows
exactly what a live run would post, and tests need no server.

Every body starts with its markers (a cut at the end never loses them), clips a long model
text with a pointer to the artifact, holds a repro whole or says where the run keeps it
(a cut script could never run, nor its issue close), and is scrubbed of secrets last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from backends.results import BackendInfo
from bot.findings.divergence_text import divergence_lines, support_lines
from bot.findings.summary import FindingRef
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
    trigger_marker,
)
from oracles.compare import PRECISION_UNITS, OutputDiff
from oracles.count_keys import CountKey
from oracles.sides import CrossVerdict, SideName
from oracles.verdict import Verdict

TITLE_CHARS = 120
PART_CHARS = 20_000
"""A model text longer than this is clipped, so one finding cannot crowd out the rest (a
repro is never clipped: it is whole, or named with where the run keeps it)."""
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
    head = s.sides.get(SideName.head)
    if head is not None and head.commit:
        return head.commit
    if s.backend is not None:  # a release: its version says more than the commit it was built from
        build = f"{s.backend.name} {s.backend.version}"
        return f"{build} @ {s.backend.commit[:12]}" if s.backend.commit else build
    return "unknown"


def _details(summary: str, body: str, lang: str, artifact: str, limit: int = PART_CHARS) -> list[str]:
    if not body:
        return [f"*{summary}: not in the output folder.*", ""]
    text, _ = clip(body, limit, artifact)
    return ["<details>", f"<summary>{summary}</summary>", "", fence(text, lang), "", "</details>", ""]


def _repro_block(item: Item, report: Report, limit: int) -> list[str]:
    """repro.py between markers, so auto-close can run it again from the issue alone. A repro
    is never cut (a partial script could never run, and its issue never close): one that does
    not fit in `limit` characters is named, with where the run keeps it."""
    artifact = f"{item.bundle}/repro.py"
    if not item.repro:
        return [f"*repro.py: not in the output folder ({artifact}).*", ""]
    block = ["<details>", "<summary>repro.py (exit 1: reproduced, 0: not, 3: cannot tell)</summary>", ""]
    full = [*block, REPRO_BEGIN, fence(item.repro, "python"), REPRO_END, "", "</details>", ""]
    if len("\n".join(full)) <= limit:
        return full
    where = f"in the artifact of {_run_link(report)}" if report.summary.run_url else "in the campaign's output folder"
    return [
        f"*repro.py is {len(item.repro):,} characters, more than an issue can hold: it is `{artifact}` {where}.*",
        "",
    ]


def _run_link(report: Report) -> str:
    url = report.summary.run_url
    return f"[the run that found it]({url})" if url else "the run that found it"


def _kind(item: Item, report: Report) -> str:
    """What a finding is across builds; with one build there is nothing to compare: a bug."""
    return item.across if report.summary.base is not None else "bug"


def _differences(item: Item) -> list[str]:
    """Expected against actual, for the first differing elements of each wrong output."""
    comparison = item.finding.comparison if item.finding else None
    wrong = [o for o in comparison.outputs if o.mismatch is not None] if comparison else []
    if not wrong:
        return []
    lines = ["### What differs", "", "| output | index | expected | actual |", "|---|---|---|---|"]
    for o in wrong:
        lines += [f"| `{o.name}` | {s.index} | `{s.expected}` | `{s.actual}` |" for s in o.samples]
        if not o.samples:
            lines.append(f"| `{o.name}` | | {_one_line(o.detail, 200).replace('|', '&#124;')} | |")
    summary = "; ".join(
        f"`{o.name}`: {o.bad_elements} element(s) differ, max abs error {o.max_abs:.4g}, max rel error {o.max_rel:.4g}"
        + _in_ulps(o)
        for o in wrong
    )
    return [*lines, "", summary, ""]


def _in_ulps(o: OutputDiff) -> str:
    """The error of the element furthest past its bound, beside the bound there: both in
    the last place of the output's dtype at the output's scale."""
    if o.ulps is None or o.bound_ulps is None:
        return ""
    return f", {o.ulps:.3g} ULPs of {o.dtype} at the output's scale where the bound allows {o.bound_ulps:.3g}"


def precision_line(narrower: str) -> str:
    """What a precision-scale finding is (oracles.compare.Comparison.precision_scale)."""
    return (
        f"wrong beyond the bound, but within {PRECISION_UNITS} roundings of {narrower} at the output's scale:"
        f" computed about as precisely as {narrower}"
    )


def _localization(item: Item) -> str:
    loc = item.finding.localization if item.finding else None
    if loc is None:
        return "not checked"
    if loc.depends_on_optimization:
        return f"needs the optimizer: passes at level `{loc.level}`"
    return f"also fails at the lowest level `{loc.level}` ({loc.verdict.value})"


def _first_bad(item: Item) -> str | None:
    if item.bisect is not None:
        c = item.bisect.get("first_bad") or item.bisect.get("culprit")  # bisect.json before "first_bad"
        if isinstance(c, dict) and c.get("sha"):
            return f"`{str(c['sha'])[:12]}` {c.get('subject', '')} ({c.get('author', '')}, {c.get('date', '')})"
        cands = item.bisect.get("candidates")
        if isinstance(cands, list) and cands:
            shas = ", ".join(f"`{str(c.get('sha', ''))[:12]}`" for c in cands[:10] if isinstance(c, dict))
            return f"undecided between {len(cands)} commits: {shas}"
    return item.ref.first_bad


def _facts(item: Item, report: Report) -> list[str]:
    f = item.finding
    kind = _kind(item, report)
    rows = [
        ("verdict", item.ref.verdict.value + (f" ({kind})" if kind != item.ref.verdict.value else "")),
        ("stage", (f.stage or "?") if f else "?"),
        ("signature", f"`{_one_line(item.ref.signature, 300)}`"),
        ("fingerprint", f"`{item.ref.fingerprint}`"),
        *_builds(item, report),
    ]
    if f is not None and f.runs:
        rows.append(("runs", ", ".join(v.value for v in f.runs)))
    rows.append(("optimization", _localization(item)))
    if item.ref.precision:
        rows.append(("precision", precision_line(item.ref.precision)))
    if f is not None and (f.blamed or f.kernel):
        # where the build went wrong (bot.reduce.blame), or the kernel or pass it died in
        rows.append(("first wrong", f"`{f.blamed}`") if f.blamed else ("kernel", f"`{f.kernel}`"))
    if f is not None and f.rewrite:  # the one rewrite whose absence makes it right (bot.reduce.rewrite_blame)
        rows.append(("rewrite", f"right with `{f.rewrite}` alone turned off"))
    if f is not None and f.dtypes is not None:
        rows.append(("dtypes", f.dtypes.describe()))
    if f is not None and f.kept:
        rows.append(("reduced keeping", ", ".join(f"{side} {what}" for side, what in f.kept.items())))
    if item.ref.seen:
        rows.append(("seen with", ", ".join(f"`{form}`" for form in item.ref.seen[:20])))
    if len(item.ref.triggers) > 1:
        rows.append(("triggers", "; ".join(f"`{t}`" for t in item.ref.triggers[:10])))
    first_bad = _first_bad(item)
    if first_bad:
        rows.append(("first bad commit", first_bad))
    if item.ref.regression_of:
        filed = report.filed.get(item.ref.regression_of)
        where = f", filed as #{filed}" if filed is not None else ""
        rows.append(("known bug, back", f"`{item.ref.regression_of}` of the regression corpus fails again{where}"))
    rows.append(("seed", str(item.ref.seed)))
    rows.append(("bundle", f"`{item.bundle}`"))
    table = ["| | |", "|---|---|", *(f"| {k} | {v.replace('|', '&#124;')} |" for k, v in rows)]
    message = _one_line(f.message, 500) if f and f.message else ""
    return [*table, "", *([f"> {message}", ""] if message else [])]


def _builds(item: Item, report: Report) -> list[tuple[str, str]]:
    """The head and base rows: the campaign's builds with the commits they were built from
    (the header says the same), else what the finding recorded (an older summary)."""
    s, f = report.summary, item.finding
    head = s.build(SideName.head) if s.backend is not None else _build(f.backend if f else None)
    if s.base is not None:
        return [(SideName.head, head), (SideName.base, s.build(SideName.base))]
    base: list[tuple[str, str]] = [(SideName.base, _build(f.base_backend))] if f is not None and f.base_backend else []
    return [(SideName.head, head), *base]


def issue_title(item: Item, recurrence: int = 1) -> str:
    """`[fuzzbot] onnxruntime: crash in compile: <normalized message>`, with syzbot's ` (2)` on a
    recurrence; a bug named by a rewrite (bot.reduce.rewrite_blame) names it first, as its identity."""
    f = item.finding
    backend = f.backend.name if f else "backend"
    backend += f": {f.rewrite}" if f and f.rewrite else ""
    verdict = _verdict(item.ref)
    stage = f" in {f.stage}" if f and f.stage and item.ref.verdict != Verdict.wrong_result else ""
    suffix = f" ({recurrence})" if recurrence > 1 else ""
    return _one_line(f"[fuzzbot] {backend}: {verdict}{stage}: {item.ref.signature}", TITLE_CHARS - len(suffix)) + suffix


def issue_body(item: Item, report: Report, recurrence: int = 1, previous: int | None = None) -> str:
    lines = [fingerprint_marker(item.ref.fingerprint), recurrence_marker(recurrence)]
    known = report.known.get(item.ref.fingerprint)
    lines += [trigger_marker(known)] if known else []
    lines += [""]
    verdict = f"**{item.ref.verdict.value}** ({_kind(item, report)})"
    found = f" by {_run_link(report)}" if report.summary.run_url else ""
    lines += [f"fuzzbot found a {verdict}{found} that reproduces with a standalone script.", ""]
    if previous is not None:
        lines += [f"This bug was seen before in #{previous}, which was closed; it has come back.", ""]
    lines += _facts(item, report) + _differences(item)
    lines += ["### Reduced model (ONNX text form)", ""]
    model = _details("model.txt", item.model_text, "text", f"{item.bundle}/model.txt")
    tail = ["*This issue is closed automatically once the repro passes on head in several scheduled runs in a row.*"]
    reproduce = ["### Reproduce", "", *_run_lines(item), ""]
    room = MAX_BODY - len("\n".join(lines + reproduce + tail)) - 200
    repro = _repro_block(item, report, room - len("\n".join(model)))
    if REPRO_BEGIN not in "\n".join(repro):  # make room by clipping the model text, which the repro holds too
        model = _details("model.txt", item.model_text, "text", f"{item.bundle}/model.txt", MODEL_CHARS_MIN)
        repro = _repro_block(item, report, room - len("\n".join(model)))
    return cap_body("\n".join(lines + model + reproduce + repro + tail) + "\n")


MODEL_CHARS_MIN = 2_000
"""The model text kept when a repro needs the room: the repro embeds the model anyway."""


INSTALL_LINE = re.compile(r"#\s*Install:\s*(pip install .+?)\s*$")
"""The header line of a repro (bot.findings.repro) that says what to install."""


def _run_lines(item: Item) -> list[str]:
    """How to run the repro: the install line it names in its own header, then the run."""
    install = next((m.group(1) for m in map(INSTALL_LINE.match, item.repro.splitlines()[:12]) if m), "")
    lines = ["Save the script below as `repro.py`, then:", "", "```sh"]
    lines += [install] if install else []
    return [*lines, "python repro.py  # exit 1: reproduced, 0: not reproduced, 3: cannot tell", "```"]


def _regression(item: Item, report: Report, limit: int, room: int) -> list[str]:
    """One flagged finding in full: the model text clipped at `limit`, the repro whole when
    the `room` left in the comment holds it."""
    lines = [f"### {_verdict(item.ref)}: `{_one_line(item.ref.signature, 200)}`", ""]
    lines += _facts(item, report) + _differences(item)
    lines += _details("reduced model (ONNX text)", item.model_text, "text", f"{item.bundle}/model.txt", limit)
    return lines + _repro_block(item, report, room - len("\n".join(lines)))


def _verdict(ref: FindingRef) -> str:
    """The verdict a list shows, with a precision-scale wrong result's narrower type."""
    return ref.verdict.value + (f" (precision: {ref.precision})" if ref.precision else "")


def _short(items: Iterable[Item]) -> list[str]:
    listed = list(items)
    lines = [
        f"- `{i.ref.fingerprint}` {_verdict(i.ref)}: `{_one_line(i.ref.signature, 120)}` ({i.bundle})"
        for i in listed[:LIST_LINES]
    ]
    if len(listed) > LIST_LINES:
        lines.append(f"- ... and {len(listed) - LIST_LINES} more (see summary.md)")
    return lines


def by_label(report: Report) -> dict[str, list[Item]]:
    """One item per finding (the first bundle listed of each fingerprint), by its label:
    what "finding" counts in the comment, the same number as summary.json's `distinct`."""
    seen: set[str] = set()
    by: dict[str, list[Item]] = {}
    for item in report.items:
        if item.ref.fingerprint not in seen:
            seen.add(item.ref.fingerprint)
            by.setdefault(report.summary.key_of(item.ref), []).append(item)
    return by


def _tests(n: int) -> str:
    return f"{n} test" + ("" if n == 1 else "s")


def _pr_head(report: Report, by: dict[str, list[Item]]) -> list[str]:
    """Both builds by version and commit, what ran, and the findings that fail the check;
    a count of findings (distinct bugs) always says how many tests showed them."""
    s = report.summary
    regressions, new_in_head = by.get(CrossVerdict.new_regression, []), by.get(CrossVerdict.new_in_head, [])
    builds = (
        f"base {s.build(SideName.base)} → head {s.build(SideName.head)}"
        if s.base
        else f"one build: {s.build(SideName.head)}"
    )
    ran_by = f" (fuzzbot {s.fuzzbot_version})" if s.fuzzbot_version else ""
    head = [PR_MARKER, "## fuzzbot", "", f"{builds}; {s.tests} tests in {s.wall_s:.0f} s{ran_by}.", ""]
    if s.cannot_compare:
        head += [f"**Could not compare:** {_one_line(s.cannot_compare, 300)}", ""]
    if s.stopped_by:
        when = f" at {s.stopped_at}" if s.stopped_at else ""
        head += [f"**Interrupted by {s.stopped_by}{when}**: the tests run until then, not the whole budget.", ""]
    if regressions:
        tests = _tests(s.counts.get(CrossVerdict.new_regression, 0))
        head += [f"**{len(regressions)} new regression(s)** introduced by this change ({tests}).", ""]
    else:
        head += ["**0 new regression(s)**.", ""]
    if new_in_head:
        tests = _tests(s.counts.get(CrossVerdict.new_in_head, 0))
        head += [
            f"**{len(new_in_head)} model(s) new in head run wrong** ({tests}): "
            "base declines them, so no regression, but the change brought them in broken.",
            "",
        ]
    head += support_lines(s)
    if s.divergence is not None:
        head += ["### Where the builds differed", "", *divergence_lines(s)]
    return head


def pr_comment(report: Report) -> str:
    """The sticky PR comment: new regressions in full, then the rest in one line each."""
    by = by_label(report)
    head = _pr_head(report, by)
    rest = _rest(report, by)
    flagged = by.get(CrossVerdict.new_regression, []) + by.get(CrossVerdict.new_in_head, [])
    budget = MAX_BODY - len("\n".join(head + rest)) - 500
    per_part = max(1_000, min(PART_CHARS, budget // max(1, 2 * len(flagged))))
    body: list[str] = []
    for n, item in enumerate(flagged):
        part = _regression(item, report, per_part, MAX_BODY - 500 - len("\n".join(head + body + rest)))
        if len("\n".join(head + body + part + rest)) > MAX_BODY - 500:
            body += [f"*... {len(flagged) - n} more not shown: see summary.md.*", ""]
            break
        body += part
    return cap_body("\n".join(head + body + rest) + "\n")


def _rest(report: Report, by: dict[str, list[Item]]) -> list[str]:
    """Fixed and persistent findings in one line each, then what is counted by test only:
    flaky cases (no fingerprint makes two of them one) and the set-aside ones."""
    counts = report.summary.counts
    lines: list[str] = []
    if report.summary.base:
        titles = {CrossVerdict.fixed.value: "Fixed", CrossVerdict.persistent.value: "Persistent (also on base)"}
    else:
        titles = {
            k.value: f"Bugs of this build, {k} (no base to compare)"
            for k in (Verdict.crash, Verdict.wrong_result, Verdict.timeout)
        }
    for key, title in titles.items():
        items = by.get(key, [])
        if items or counts.get(key):
            precise = sum(1 for i in items if i.ref.precision)
            apart = f"; {precise} precision-scale, listed below" if precise else ""
            found = f"{len(items)} finding(s)** ({_tests(counts.get(key, 0))}{apart})"
            listed = _short(i for i in items if not i.ref.precision)
            lines += [f"**{title}: {found}", "", *([*listed, ""] if listed else [])]
    # apart, so that they neither drown the wrong results nor vanish among them
    precise_items = [i for key in titles for i in by.get(key, []) if i.ref.precision]
    if precise_items:
        title = "wrong beyond the bound, within a few roundings of a narrower float type"
        lines += [f"**Precision-scale: {len(precise_items)} finding(s)** ({title})", "", *_short(precise_items), ""]
    flaky = counts.get(CrossVerdict.flaky, 0)
    if flaky or report.flaky:
        extra = [f"- {line}" for line in report.flaky[:LIST_LINES]]
        lines += [f"**Flaky (never counted as a regression): {_tests(flaky)}**", "", *extra, ""]
    other = {k: n for k, n in counts.items() if CountKey(k).is_aside and k != CrossVerdict.flaky}
    if other:
        lines += ["Set aside (tests): " + ", ".join(f"{k} {n}" for k, n in sorted(other.items())), ""]
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
