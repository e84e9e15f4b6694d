"""`fuzzbot merge`: the command-line face of bot/merge/outputs.py, registered by bot/cli.py.

Kept apart from cli.py so that merge's wording lives with merge; every mistake a user
can make is a `MergeError` (bot.merge.outputs), which cli.py prints as one `error:` line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def merge_command(
    shards: Annotated[
        list[Path], typer.Argument(metavar="DIR...", help="shard output folders (each with summary.json)")
    ],
    out: Annotated[Path, typer.Option(help="merged output folder (new, empty, or an earlier merge)")],
    regressions: Annotated[
        Path | None, typer.Option(help="regression corpus: add the merged reduced findings to it")
    ] = None,
) -> None:
    """Merge shard outputs into one: counts add up, findings are deduplicated by fingerprint.
    A sharded run leaves the regression corpus alone; the merge adds what the shards reduced."""
    from bot.cases.regression_corpus import RegressionCorpus
    from bot.findings.outcome import findings_exit
    from bot.findings.summary_md import SUMMARY_MD
    from bot.merge.outputs import merge_outputs

    summary, report = merge_outputs(shards, out)
    if regressions is not None:
        corpus = RegressionCorpus.open(regressions)
        added = corpus.add(out, summary.findings)
        typer.echo(f"added {len(added)} reduced finding(s) to the regression corpus {regressions}", err=True)
        for fingerprint, why in corpus.unsaved.items():
            typer.echo(f"warning: {fingerprint} not added to the regression corpus: {why}", err=True)
    skipped = f" (skipped {len(report.skipped)} already merged)" if report.skipped else ""
    typer.echo(
        f"merged {len(report.merged)} output(s) into {out}{skipped}: "
        f"{summary.tests} tests, {sum(summary.distinct.values())} distinct finding(s); see {out / SUMMARY_MD}",
        err=True,
    )
    for path in report.missing_bundles:
        typer.echo(f"warning: bundle {path} is missing; its finding is counted without a bundle", err=True)
    raise typer.Exit(findings_exit(summary))  # exactly as `fuzzbot fuzz` exits on the same findings


__all__ = ["merge_command"]
