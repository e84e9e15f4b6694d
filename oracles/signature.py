"""Normalized failure messages and stable fingerprints.

Two runs of the same bug differ in addresses, tensor names, shapes and temp paths;
those are erased so that the same bug always hashes to the same fingerprint.
"""

from __future__ import annotations

import hashlib
import re

_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"(?:/[\w.+-]+)+/[\w.+-]*"), "<path>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<name>"),
    (re.compile(r"\b(?:t|w|c|n|input)\d+(?:_\w+)?\b"), "<name>"),
    (re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def first_meaningful_line(message: str) -> str:
    for line in message.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ", "During handling")):
            return line
    return ""


def normalize(message: str) -> str:
    text = first_meaningful_line(message)
    for pattern, repl in _RULES:
        text = pattern.sub(repl, text)
    return text.strip()[:300]


def fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]
