"""The one exception family of `fuzzbot report`: cli.py prints any of them as one line."""

from __future__ import annotations

from bot.errors import UserError


class ReportError(UserError):
    """A report that cannot be made (bad options, unreadable output, GitHub refusing or away)."""


class GitHubUnavailable(ReportError):
    """GitHub kept failing (5xx, dropped connections, rate limit) past the retry budget; the
    queue keeps what was not sent."""
