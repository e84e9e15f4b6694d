"""Bisecting a regression to the commit that introduced it: the search over a range of
commits, each built and asked about the finding's reduced model.

May import: bot.findings, bot.sides, bot.config, bot.errors.
"""
