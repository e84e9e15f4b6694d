"""Auto-close: every scheduled run re-runs the repro of each open bot issue whose bug the run
did not see, on head (the campaign's build), and closes the issue once it has passed in
`close_after` runs in a row.

The repro comes from the issue body itself (between markers; a clipped one is never run),
so no state outside GitHub is needed and any runner can do it. The count lives in the bot's
status comment with the run that last counted, so reporting one output twice counts once.
Never closed: an issue a person reopened, or one labelled `fuzzbot:keep-open`.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot.github.actions import KEEP_OPEN_LABEL, Action, reopened_by_person
from bot.github.client import IssueInfo, Reader
from bot.github.findings import Report
from bot.github.render import close_comment, head_commit, status_comment
from bot.github.schedule import Plan
from bot.github.text import REPRO_BEGIN, REPRO_END, STATUS_MARKER, find_clean_runs, find_fingerprint, unfence

_SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL", re.IGNORECASE)


@dataclass(frozen=True)
class ReproRunner:
    """Runs a repro with head's interpreter: exit 0 means the bug is gone."""

    python: str
    timeout_s: float = 300.0

    def passes(self, script: str) -> bool:
        """The script runs in a scratch folder, without the environment's secrets (it came from
        an issue body, which people with write access can edit)."""
        env = {k: v for k, v in os.environ.items() if not _SECRET_ENV.search(k)}
        with tempfile.TemporaryDirectory(prefix="fuzzbot-repro-") as tmp:
            path = Path(tmp) / "repro.py"
            path.write_text(script)
            try:
                done = subprocess.run(
                    [self.python, str(path)], cwd=tmp, env=env, capture_output=True, timeout=self.timeout_s, check=False
                )
            except (subprocess.TimeoutExpired, OSError):
                return False
        return done.returncode == 0


def extract_repro(body: str) -> str | None:
    start, end = body.find(REPRO_BEGIN), body.find(REPRO_END)
    if start < 0 or end < start:
        return None
    return unfence(body[start + len(REPRO_BEGIN) : end])


def plan_closes(
    report: Report, reader: Reader, issues: list[IssueInfo], seen: set[str], runner: ReproRunner, close_after: int
) -> Plan:
    plan = Plan()
    for issue in issues:
        fp = find_fingerprint(issue.body)
        if issue.state != "open" or fp is None or fp in seen:
            continue
        why_not = _never_close(reader, issue)
        if why_not:
            plan.notes.append(f"#{issue.number} left open: {why_not}")
            continue
        action = _step(report, reader, issue, runner, close_after)
        if action is not None:
            plan.actions.append(action)
    return plan


def _never_close(reader: Reader, issue: IssueInfo) -> str | None:
    if KEEP_OPEN_LABEL in issue.labels:
        return f"labelled {KEEP_OPEN_LABEL}"
    if reopened_by_person(reader, issue):
        return "reopened by a person"
    return None


def _step(report: Report, reader: Reader, issue: IssueInfo, runner: ReproRunner, close_after: int) -> Action | None:
    """The next count for one issue: close, count one more clean run, or back to zero."""
    commit = head_commit(report)
    status = next((c for c in reader.comments(issue.number) if STATUS_MARKER in c.body), None)
    clean, counted_run = find_clean_runs(status.body) if status else (0, "")
    if counted_run != report.run_id:  # this output has not been counted yet
        script = extract_repro(issue.body)
        if script is None:
            return None
        if not runner.passes(script):
            if clean == 0:
                return None
            clean = 0
        else:
            clean += 1
    if clean >= close_after:
        return Action(kind="close", key=f"close-{issue.number}", number=issue.number, body=close_comment(commit, clean))
    body = status_comment(clean, close_after, commit, report.run_id)
    if status is not None and status.body.strip() == body.strip():
        return None
    if status is None and clean == 0:
        return None
    return Action(kind="status", key=f"status-{issue.number}", number=issue.number, body=body)
