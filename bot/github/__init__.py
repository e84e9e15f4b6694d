"""Reporting a campaign on GitHub: a sticky PR comment, or deduplicated, auto-closing issues.

One job per module: `findings` reads an output folder; `text` (markers, scrubbing, size
limits) and `render` make the Markdown; `client` talks to GitHub through PyGithub with
bounded retries; `actions` turns every write into an idempotent ensure step, `queue` keeps
unsent ones on disk, `dispatch` sends them (or writes them, in a dry run); `pr`, `schedule`
and `autoclose` decide what to write. `bot/commands/report.py` is the command.
"""
