"""The triggers of the bot's open issues, for a campaign to steer away from.

An issue the bot files carries its bug's trigger in a hidden marker (bot.github.text); a
campaign that knows the open ones spends no budget on bugs a maintainer already has in
front of them. Only the bot's own open issues count: a closed issue's bug is fixed, or
wanted back if it returns, and a person's issue cannot inject a trigger.
"""

from __future__ import annotations

import json
from typing import Any

from bot.github.client import IssueInfo
from bot.github.text import find_fingerprint, find_trigger


def open_issue_triggers(issues: list[IssueInfo]) -> list[dict[str, Any]]:
    """known-bugs.json rows from the open issues' markers, one per fingerprint; a marker that
    is not a row of this issue's own fingerprint is skipped."""
    rows: dict[str, dict[str, Any]] = {}
    for issue in issues:
        if issue.state != "open":
            continue
        text = find_trigger(issue.body)
        if text is None:
            continue
        try:
            row = json.loads(text)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("fingerprint") == find_fingerprint(issue.body):
            rows[str(row["fingerprint"])] = row
    return list(rows.values())
