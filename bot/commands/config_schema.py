"""`fuzzbot config-schema`: the JSON schema of fuzzbot.yml, from the config model,
registered by bot/cli.py. A file it cannot write is a `SchemaError`, which cli.py prints
as one `error:` line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from bot.errors import UserError


class SchemaError(UserError):
    """`fuzzbot config-schema --out FILE` could not write FILE; one line."""


def config_schema_command(
    out: Annotated[Path | None, typer.Option(help="write the schema to FILE instead of stdout")] = None,
) -> None:
    """Print the JSON schema of fuzzbot.yml, for editors and CI validation."""
    from bot.config import FuzzConfig  # the config model imports the generator: only when asked

    text = json.dumps(FuzzConfig.model_json_schema(), indent=2) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text)
    except OSError as e:
        raise SchemaError(f"--out {out}: cannot write: {e.strerror or e}") from e


__all__ = ["SchemaError", "config_schema_command"]
