"""Which environment variables are credentials, for every place that runs code it did not write.

The Action's fuzz step and a report job's rebuild of head both run the compiler's own build
recipe; neither may hand it the GitHub token (or the runner's own tokens), whatever the
variable is called.
"""

from __future__ import annotations

from collections.abc import Mapping

SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD")


def looks_secret(name: str) -> bool:
    return any(word in name.upper() for word in SECRET_WORDS)


def without_credentials(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not looks_secret(k)}
