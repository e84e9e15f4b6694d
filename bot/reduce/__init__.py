"""Reducing a finding to a minimal model that still shows the bug: judging candidates as a
campaign judges cases, the reduction of one bundle with its relabelling, and the
generalization of what the reduced trigger needs.

May import: bot.config, bot.findings, backends, oracles, reducers
(docs/architecture.md; tests/test_layout.py enforces it).
"""
