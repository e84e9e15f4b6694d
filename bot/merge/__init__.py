"""Merging the outputs of sharded campaigns into one, findings under one label each.

May import: bot.findings, bot.cases, bot.config, bot.errors.
"""
