"""The bot: CLI, config, campaigns, bundles and reports."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fuzzbot")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
