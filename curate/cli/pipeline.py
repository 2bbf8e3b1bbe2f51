"""``curate pipeline``: documents to training data, every stage (``curate.flows.pipeline.run_pipeline``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from
from curate.cli.teacher import teacher_servers


@click.command(cls=Command)
@options_from("curate.flows.pipeline:PipelineOptions")
@teacher_servers
def pipeline(**kw) -> None:
    """From documents alone to training data: generate --from-corpus, filter, mine, [relabel,] export.

    DOCS is a BEIR folder, a corpus JSONL, a folder of .txt/.md/.html files or one such file.
    Each stage writes its own sub-folder of OUT; re-running the same command resumes, skipping
    the stages done earlier, and answers the LLM sent before come from OUT/.cache/llm.sqlite.
    Ends with the funnel (what each stage kept, and why it dropped the rest), also in
    OUT/pipeline.json.
    """
    from curate.flows.pipeline import PipelineOptions, run_pipeline

    run_pipeline(from_options(PipelineOptions, kw))
