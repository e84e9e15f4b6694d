"""One campaign: both sides opened and probed, cases run on lanes of workers, each case
judged (triage), findings kept, reduced (bot.reduce.campaign) and bisected while and after
fuzzing; the working state its parts share, from which summary.json is built once
(`state`); what a person watching it sees.

May import: bot.cases, bot.reduce, bot.bisect, bot.findings, bot.sides, bot.config, bot.errors.
"""
