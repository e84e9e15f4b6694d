"""The thin layer of `fuzzbot` subcommands beyond fuzz and gen: each parses its
arguments, calls into the feature package that owns the work, and turns its errors into
one line and an exit status.

May import: any bot package.
"""
