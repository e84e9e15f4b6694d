"""The words for where two builds differed: one text for summary.md and the PR comment.

Even a PR with no regression changed something, and a reviewer wants to know what: which
rewrites only head performs, which models it stopped or started running, how many tests
landed there. These lines say it, from summary.json's `divergence` and `support_changes`.
"""

from __future__ import annotations

from bot.findings.summary import Summary

KIND_WORDS = {
    "support": "support",
    "outcome": "one build fails",
    "verdict": "one build wrong",
    "rewrite": "rewrites",
    "rewrite_count": "rewrite counts",
    "bits": "output bits (both right)",
    "compile_time": "compile time",
}


def _tests(n: int) -> str:
    return f"{n} test" + ("" if n == 1 else "s")


def divergence_lines(summary: Summary, top: int = 6) -> list[str]:
    """Markdown lines: how many tests the builds differed on, by kind, and the top keys."""
    d = summary.divergence
    if d is None:
        return []
    if not d.tests:
        return [f"The builds behaved the same on all {_tests(summary.tests)}.", ""]
    kinds = ", ".join(f"{KIND_WORDS.get(k, k)} {n}" for k, n in sorted(d.kinds.items(), key=lambda kv: -kv[1]))
    lines = [f"The builds differed on {_tests(d.tests)} of {summary.tests} ({kinds}); {d.fed} steered generation.", ""]
    lines += [f"- {KIND_WORDS.get(k.kind, k.kind)}: `{k.key}` ({_tests(k.tests)})" for k in d.top[:top]]
    if d.keys > top:
        lines.append(f"- ... {d.keys - top} more (summary.json `divergence`)")
    return [*lines, ""]


def support_lines(summary: Summary) -> list[str]:
    """Markdown lines: the models head stopped running (dropped support) and started running."""
    s = summary.support_changes
    if s is None:
        return []
    lines: list[str] = []
    if s.dropped_keys:
        fails = " (fails the check: `oracles.fail_on_dropped_support`)" if s.fails_check else ""
        total = sum(s.dropped_keys.values())
        lines += [f"**Dropped support: head declines {_tests(total)} base ran right**{fails}.", ""]
        for key, n in sorted(s.dropped_keys.items(), key=lambda kv: -kv[1]):
            example = next((f for f in s.dropped if f.key == key), None)
            where = f", e.g. `{example.path}`" if example is not None else ""
            lines.append(f"- `{key}` ({_tests(n)}{where})")
        lines.append("")
    if s.gained:
        ops = {k.removeprefix("only base declines").strip() or "models": n for k, n in s.gained.items()}
        gained = ", ".join(f"`{op}` {n}" for op, n in ops.items())
        lines += [f"Gained support: head runs right {_tests(sum(s.gained.values()))} base declined ({gained}).", ""]
    return lines
