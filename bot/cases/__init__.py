"""Where test cases come from: a seed made into a runnable case (generation, values, the
reference), the order a campaign takes them in (fresh, from the case corpus, from
generation processes), the regression corpus, and cases a user hands over.

May import: bot.findings, bot.sides, bot.config, bot.errors.
"""
