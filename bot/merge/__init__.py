"""Merging the outputs of sharded campaigns into one, findings under one label each.

May import: bot.errors, bot.findings, generator
(docs/architecture.md; tests/product/test_layout.py enforces it).
"""
