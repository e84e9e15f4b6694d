"""How a worker died, read from its last words on stderr.

A signal alone names a bug badly. Memory corruption shows a different signal from one
process to the next: onnxruntime 1.25.1's stack buffer overrun while optimizing a Shape ->
Gather is a SIGSEGV in fuzzbot's worker, after glibc's "stack smashing detected", and a
SIGABRT in a plain interpreter; its campaign reported it once as each. A reducer, a label
or a bisection that demands the same signal takes one bug for two. A SIGABRT is not always
memory, though: an uncaught C++ exception or a failed assertion aborts too, and that is
another bug. glibc says which on stderr before it aborts, so the words decide.
"""

from __future__ import annotations

import re

MEMORY_SIGNALS = frozenset({"SIGSEGV", "SIGBUS"})
"""Signals that only a bad memory access raises."""

_MEMORY_WORDS = re.compile(
    r"stack smashing detected|double free|free\(\): |malloc\(\): |realloc\(\): |corrupted size|"
    r"corrupted double-linked list|munmap_chunk\(\)|malloc_consolidate|heap-buffer-overflow|"
    r"AddressSanitizer"
)
"""What glibc's heap and stack checks (and AddressSanitizer) print before they abort."""

_ABORT_WORDS = re.compile(r"terminate called|Assertion .* failed|Check failed|\*\*\* ")
"""Other last words worth quoting: an uncaught exception, a failed assertion or check."""


def last_words(stderr: str) -> str:
    """The last line of a dead worker's stderr that says why it died, or "" (a plain
    SIGSEGV usually says nothing)."""
    for line in reversed(stderr.splitlines()):
        line = line.strip()
        if _MEMORY_WORDS.search(line) or _ABORT_WORDS.search(line):
            return line[:200]
    return ""


def is_memory_fault(signal: str | None, words: str) -> bool:
    """Whether a death is memory corruption: a bad access, or an abort by a heap or stack
    check. Two such deaths on one trigger are one bug whatever the signal."""
    return signal in MEMORY_SIGNALS or (signal == "SIGABRT" and bool(_MEMORY_WORDS.search(words)))


_TRANSFORMER_DONE = re.compile(r"GraphTransformer (\S+) modified")
"""onnxruntime's log line (at INFO, newer releases) after each graph transformer ran."""


def optimizer_site(stderr: str) -> str:
    """Where in the optimizer a worker died that logged its transformers (the onnxruntime
    adapter's `trace` option): `after <the last transformer that finished>`, or "". Deaths
    in one transformer share it, whatever the trigger that walked into them: the two
    triggers of onnxruntime 1.25.1's stack smash in constant folding a Shape -> Gather (a
    Cast before the Shape, or a second branch beside it) both die after
    Level1_RuleBasedTransformer."""
    done = _TRANSFORMER_DONE.findall(stderr)
    return f"after {done[-1]}" if done else ""
