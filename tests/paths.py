"""Where the repository and the tests' own data are, for test modules at any depth of
tests/ (they are laid out as the packages are)."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
