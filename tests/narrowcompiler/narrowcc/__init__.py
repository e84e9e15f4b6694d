"""narrowcc: a narrow compiler for fuzzbot's tests (see README.md)."""

__version__ = "1.0"
