"""Where planned actions go: to GitHub through the on-disk queue, or, in a dry run, to files
(the exact Markdown, one file per comment or issue, and plan.json) with no write request."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Protocol

from bot.github.actions import Action, apply
from bot.github.client import RetryPolicy, Tracker
from bot.github.errors import GitHubUnavailable, ReportError
from bot.github.queue import ReportQueue
from bot.github.text import scrub


class Sink(Protocol):
    def send(self, action: Action) -> str: ...
    def note(self, text: str) -> None: ...
    def finish(self) -> None: ...


def _log(text: str, secrets: tuple[str, ...]) -> None:
    print(scrub(text, secrets), file=sys.stderr)


class LiveSink:
    """Each action is queued, applied (retried as a whole, so lookups repeat), then dequeued."""

    def __init__(self, tracker: Tracker, policy: RetryPolicy, queue: ReportQueue) -> None:
        self.tracker, self.policy, self.queue = tracker, policy, queue
        self.log: list[tuple[Action, str]] = []

    def replay(self) -> int:
        """Send what an earlier, interrupted report left in the queue; how many there were. An
        outage stops it (the queue is kept); an action GitHub refuses outright (a 4xx: a deleted
        PR, a locked issue) is dropped with a warning, or it would block every later report."""
        pending = self.queue.pending()
        for entry, action in pending:
            try:
                self._apply(entry, action, "replayed ")
            except GitHubUnavailable:
                raise
            except ReportError as e:
                self.queue.done(entry)
                _log(f"warning: dropped queued {action.key}: {e}", self.policy.secrets)
        return len(pending)

    def send(self, action: Action) -> str:
        action = scrubbed(action, self.policy.secrets)
        return self._apply(self.queue.put(action), action, "")

    def _apply(self, entry: Path, action: Action, how: str) -> str:
        tracker = self.tracker
        outcome = self.policy.call(action.key, lambda: apply(action, tracker))
        self.queue.done(entry)
        self.log.append((action, outcome))
        _log(f"{how}{action.key}: {outcome}", self.policy.secrets)
        return outcome

    def note(self, text: str) -> None:
        _log(text, self.policy.secrets)

    def finish(self) -> None:
        return None


class DryRunSink:
    """Writes `NN-<key>.md` per action with a body, and plan.json listing every action and note."""

    def __init__(self, folder: Path, secrets: tuple[str, ...], pending: list[Action]) -> None:
        self.folder, self.secrets = folder, secrets
        folder.mkdir(parents=True, exist_ok=True)
        self.plan: list[dict[str, Any]] = [self._entry(a, None, queued=True) for a in pending]
        self.notes: list[str] = []
        self.log: list[tuple[Action, str]] = []

    def _entry(self, action: Action, file: str | None, queued: bool = False) -> dict[str, Any]:
        entry = action.model_dump(exclude={"body"})
        entry["file"] = file
        if queued:
            entry["from_queue"] = True
        return entry

    def send(self, action: Action) -> str:
        """A write with no body (putting labels back) is listed in plan.json only."""
        action = scrubbed(action, self.secrets)
        name = f"{len(self.plan) + 1:02d}-{re.sub(r'[^A-Za-z0-9_.-]+', '-', action.key)}.md" if action.body else None
        if name is not None:
            (self.folder / name).write_text(action.body)
        self.plan.append(self._entry(action, name))
        self.log.append((action, "planned"))
        _log(f"dry run: {action.key} -> {self.folder / name if name else 'plan.json'}", self.secrets)
        return "planned"

    def note(self, text: str) -> None:
        self.notes.append(text)
        _log(text, self.secrets)

    def finish(self) -> None:
        plan = {"actions": self.plan, "notes": self.notes}
        (self.folder / "plan.json").write_text(scrub(json.dumps(plan, indent=2), self.secrets) + "\n")


def scrubbed(action: Action, secrets: tuple[str, ...]) -> Action:
    """The action as it may leave this process: title and body without secrets."""
    return action.model_copy(update={"title": scrub(action.title, secrets), "body": scrub(action.body, secrets)})
