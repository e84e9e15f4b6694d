"""What a campaign leaves on disk and tells people: bundles (model, inputs, expected
outputs, finding.json, repro.py), the findings store, summary.json and summary.md (and
the findings a campaign has kept while it runs, `kept`), the standalone repro scripts,
and the known-bugs file.

May import: bot (the version), bot.errors, bot.files, bot.sides, backends, generator, oracles
(docs/architecture.md; tests/product/test_layout.py enforces it).
"""
