"""Systems under test, each driven in its own worker process.

This package is also imported inside worker interpreters that have only numpy and
the system under test installed, so nothing here may import pydantic, torch or
the generator at package level.
"""
