"""The bot's error family: what a user's input or environment can cause, said in one line.

The CLI catches `UserError` (and the other packages' own families) and prints `error:` and
the message, never a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input or an unusable environment, reported in one line with exit status 1."""
