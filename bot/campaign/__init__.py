"""One campaign: both sides opened and probed, cases run on lanes of workers, each case
judged (triage), findings kept, reduced and bisected while and after fuzzing; what a
person watching it sees.

May import: bot.cases, bot.reduce, bot.bisect, bot.findings, bot.sides, bot.config, bot.errors.
"""
