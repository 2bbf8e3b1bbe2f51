"""``curate serve``: vLLM (or replicas on Ray) for the LLM stages and teachers (``curate.llm.serve``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from


@click.command(cls=Command)
@options_from("curate.llm.serve:ServeOptions")
def serve(**kw) -> None:
    """Start a vLLM server on 127.0.0.1 tuned for batch generation (or, with --embed, an
    embedding model for the teacher); Ctrl-C stops it.

    Works with vLLM's GPU build (needs an NVIDIA GPU) and its CPU build (`make vllm`).
    Extra arguments after `--` go to vLLM unchanged.
    """
    from curate.llm.serve import ServeOptions, serve as run_serve

    run_serve(from_options(ServeOptions, kw))
