"""Deciding what a run means: comparison against the reference, verdicts, signatures."""
