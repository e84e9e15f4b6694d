"""Reducing findings to minimal models that still show the bug, with the generic engine in
reducers/: judging candidates as a campaign judges cases (`candidates`), the workers a
reduction runs (`workers`), the reduction of
one bundle with its relabelling and naming (`finding`), the generalization of what the
reduced trigger needs (`generalize`), and a campaign's reduction phase, while and after
fuzzing, with the known bugs it learns (`campaign`). The `fuzzbot reduce` verb is
bot/commands/reduce.py.

May import: bot.config, bot.errors, bot.files, bot.findings, backends, generator, oracles, reducers
(docs/architecture.md; tests/product/test_layout.py enforces it).
"""
