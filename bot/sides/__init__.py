"""The two builds a campaign compares, below everything that judges them: the `compiler:`
config of each side, the checkouts and venvs fuzzbot builds (workspace), the check that a
worker imports its own side's build (isolation), and what each build supports (probe).

May import: bot.errors, bot.credentials, bot.files, and the packages outside bot (backends, generator).
"""
