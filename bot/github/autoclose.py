"""Auto-close: every scheduled run re-runs the repro of each open bot issue whose bug the run
did not see, on head (the campaign's build), and closes the issue once it has passed in
`close_after` runs in a row.

The repro comes from the issue body itself (between markers; a clipped one is never run),
so no state outside GitHub is needed and any runner can do it. The count lives in the bot's
status comment with the run that last counted, so reporting one output twice counts once;
only the bot's own status comment is read, so a person cannot set the count by typing one.
Never closed: an issue a person reopened, or one labelled `fuzzbot:keep-open`.

A repro says what it saw by its exit status: 0 not reproduced (a clean run), 1 reproduced
(the count goes back to 0), 3 cannot tell (a missing package, an op this version lacks).
Anything else, a timeout or a crash cannot tell either: a broken environment must neither
close an issue nor hide that a fix held, so the count stays and the status comment says why.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bot.github.actions import KEEP_OPEN_LABEL, Action, bot_comment, reopened_by_person
from bot.github.client import CommentInfo, IssueInfo, Reader
from bot.github.findings import Report
from bot.github.render import close_comment, head_commit, status_comment
from bot.github.schedule import Plan
from bot.github.text import (
    CANNOT_TELL,
    REPRO_BEGIN,
    REPRO_END,
    STATUS_MARKER,
    clean_runs_marker,
    find_clean_runs,
    find_fingerprint,
    unfence,
)

_SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL", re.IGNORECASE)
EXIT_CLEAN, EXIT_REPRODUCED, EXIT_CANNOT_TELL = 0, 1, 3
REASON_CHARS = 300

Rerun = Literal["clean", "reproduced", "cannot_tell"]


@dataclass(frozen=True)
class ReproOutcome:
    verdict: Rerun
    reason: str = ""
    """Why it could not tell: the script's last output line, or what stopped it."""


@dataclass(frozen=True)
class ReproRunner:
    """Runs a repro with head's interpreter and reads its exit status by the contract above."""

    python: str
    timeout_s: float = 300.0

    def passes(self, script: str) -> ReproOutcome:
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
            except subprocess.TimeoutExpired:
                return ReproOutcome("cannot_tell", f"timed out after {self.timeout_s:g} s")
            except OSError as e:
                return ReproOutcome("cannot_tell", f"cannot start {self.python}: {e.strerror or e}")
        return outcome_of(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


def outcome_of(code: int, stdout: str, stderr: str = "") -> ReproOutcome:
    """Exit 3 says why in its last line on stdout (the repro's contract); any other failure is
    most often a traceback or a shell's complaint, whose last line is on stderr."""
    if code == EXIT_CLEAN:
        return ReproOutcome("clean")
    if code == EXIT_REPRODUCED:
        return ReproOutcome("reproduced")
    if code == EXIT_CANNOT_TELL:
        return ReproOutcome("cannot_tell", last_line(stdout) or last_line(stderr) or "exit 3 with no output")
    what = f"killed by signal {-code}" if code < 0 else f"exit {code}"
    last = last_line(stderr) or last_line(stdout)
    return ReproOutcome("cannot_tell", f"{what}: {last}" if last else what)


def last_line(output: str) -> str:
    """The last non-blank line, flattened and cut, with anything shaped like a marker broken: it
    is the script's text going into the bot's own status comment."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    text = " ".join(lines[-1].split()) if lines else ""
    text = text.replace("<!--", "<!- -").replace("-->", "- ->")
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def _code_span(text: str) -> str:
    """Inline code whose fence outlasts any backtick run inside, so it cannot end early; inside
    it an @mention pings no one and HTML is shown, not rendered."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    return f"{ticks} {text} {ticks}"


def cannot_tell_comment(clean: int, close_after: int, commit: str, run_id: str, reason: str) -> str:
    """The status comment of a run that could not tell: the count is carried over unchanged."""
    return (
        f"{STATUS_MARKER}\n{clean_runs_marker(clean, run_id)}\n{CANNOT_TELL}{_code_span(reason)}\n\n"
        f"The repro could not tell on head (`{commit}`) whether the bug is still there; the count of "
        f"clean runs stays at {clean} (the issue closes after {close_after}).\n"
    )


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
    """The next count for one issue: close, count one more clean run, back to zero, or (could
    not tell) the same count with the reason."""
    commit = head_commit(report)
    status = bot_comment(reader, issue.number, STATUS_MARKER)
    clean, counted_run = find_clean_runs(status.body) if status else (0, "")
    if counted_run == report.run_id:  # this output was counted already: only a close may be left
        return _close(issue, commit, clean) if clean >= close_after else None
    script = extract_repro(issue.body)
    if script is None:
        return None
    outcome = runner.passes(script)
    if outcome.verdict == "cannot_tell":
        body = cannot_tell_comment(clean, close_after, commit, report.run_id, outcome.reason)
        return _status(issue, status, body)
    if outcome.verdict == "reproduced":
        if clean == 0 and (status is None or CANNOT_TELL not in status.body):
            return None  # still at zero and already said so (or nothing to say): no write
        clean = 0
    else:
        clean += 1
    if clean >= close_after:
        return _close(issue, commit, clean)
    return _status(issue, status, status_comment(clean, close_after, commit, report.run_id))


def _close(issue: IssueInfo, commit: str, clean: int) -> Action:
    return Action(kind="close", key=f"close-{issue.number}", number=issue.number, body=close_comment(commit, clean))


def _status(issue: IssueInfo, status: CommentInfo | None, body: str) -> Action | None:
    if status is not None and status.body.strip() == body.strip():
        return None
    return Action(kind="status", key=f"status-{issue.number}", number=issue.number, body=body)
