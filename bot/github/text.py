"""Markers, secret scrubbing and size limits shared by every body the bot posts.

The bot finds its own comments and issues again by hidden HTML-comment markers, never by
the Search API (eventually consistent, rate-limited harder), so markers are the bot's
memory; they live here so the writer and the reader can never disagree on the spelling.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable

MAX_BODY = 65_000
"""GitHub refuses bodies over 65,536 characters; the rest is headroom for the notice."""

PR_MARKER = "<!-- fuzzbot:pr -->"
STATUS_MARKER = "<!-- fuzzbot:status -->"
CLOSE_MARKER = "<!-- fuzzbot:closed -->"
REPRO_BEGIN = "<!-- fuzzbot:repro:begin -->"
REPRO_END = "<!-- fuzzbot:repro:end -->"
CANNOT_TELL = "could not re-run: "
"""Opens the line of a status comment whose last re-run could not tell (exit 3, a timeout, ...)."""

_FINGERPRINT = re.compile(r"<!-- fuzzbot:fingerprint=([0-9A-Za-z_.:-]+) -->")
_RECURRENCE = re.compile(r"<!-- fuzzbot:recurrence=(\d+) -->")
_CLEAN_RUNS = re.compile(r"<!-- fuzzbot:clean-runs=(\d+) run=([0-9A-Za-z_-]*) -->")
_OCCURRENCE = re.compile(r"<!-- fuzzbot:occurrence run=([0-9A-Za-z_-]*) -->")
_TRIGGER = re.compile(r"<!-- fuzzbot:trigger=([A-Za-z0-9_=-]+) -->")
_TOKEN = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,})")


def fingerprint_marker(fingerprint: str) -> str:
    return f"<!-- fuzzbot:fingerprint={fingerprint} -->"


def recurrence_marker(n: int) -> str:
    return f"<!-- fuzzbot:recurrence={n} -->"


def clean_runs_marker(n: int, run_id: str) -> str:
    """The auto-close counter, with the run that last counted so a re-run counts once."""
    return f"<!-- fuzzbot:clean-runs={n} run={run_id} -->"


def occurrence_marker(run_id: str) -> str:
    return f"<!-- fuzzbot:occurrence run={run_id} -->"


def trigger_marker(row: str) -> str:
    """A known bug's trigger (a known-bugs.json row), base64url so no text can end the comment."""
    return f"<!-- fuzzbot:trigger={base64.urlsafe_b64encode(row.encode()).decode()} -->"


def find_trigger(body: str) -> str | None:
    """The known-bugs.json row an issue carries, or None (no marker, or not decodable)."""
    m = _TRIGGER.search(body or "")
    if not m:
        return None
    try:
        return base64.urlsafe_b64decode(m.group(1)).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def find_fingerprint(body: str) -> str | None:
    m = _FINGERPRINT.search(body or "")
    return m.group(1) if m else None


def find_recurrence(body: str) -> int:
    m = _RECURRENCE.search(body or "")
    return int(m.group(1)) if m else 1


def find_clean_runs(body: str) -> tuple[int, str]:
    m = _CLEAN_RUNS.search(body or "")
    return (int(m.group(1)), m.group(2)) if m else (0, "")


def is_occurrence(body: str) -> bool:
    return _OCCURRENCE.search(body or "") is not None


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every given secret and anything shaped like a GitHub token masked, so a
    token that leaked into a message, a log tail or a repro never reaches an issue or a log."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _TOKEN.sub("***", text)


def fence(text: str, lang: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside, so content cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text.rstrip(chr(10))}\n{ticks}"


def unfence(block: str) -> str | None:
    """The content of the first fenced block in `block`, or None."""
    m = re.search(r"^(`{3,})[^\n]*\n(.*?)\n\1\s*$", block.strip(), re.DOTALL)
    return m.group(2) + "\n" if m else None


def clip(text: str, limit: int, artifact: str) -> tuple[str, bool]:
    """`text` cut to `limit` characters at a line end; the second value says whether it was cut."""
    if len(text) <= limit:
        return text, False
    cut = text[:limit]
    cut = cut[: cut.rfind("\n") + 1] if "\n" in cut else cut
    return cut + f"... truncated ({len(text) - len(cut)} more characters): see `{artifact}`\n", True


def cap_body(body: str, limit: int = MAX_BODY) -> str:
    """The last line of defence: a body over the limit is cut with a notice (parts are clipped first)."""
    if len(body) <= limit:
        return body
    notice = "\n\n*(truncated: the full report is in the campaign's output folder)*\n"
    return body[: limit - len(notice)] + notice
