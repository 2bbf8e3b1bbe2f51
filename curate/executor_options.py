"""The command-line options that say where a command's parallel work runs (one definition for
every command that has some: ``filter``, ``mine``, ``ablate``)."""

from __future__ import annotations

import os
from typing import Any

import click


def executor_options(what: str, unit: str = "shards"):
    """``--executor``, ``--workers``, ``--ray-address`` and ``--gpus-per-worker`` on a command;
    ``what`` names the work they move, ``unit`` what one worker takes at a time."""
    def deco(fn):
        options = [
            click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                         help=f"Where {what} runs: here, or on Ray workers (pip install 'curate[ray]'); "
                              "the results are the same."),
            click.option("--workers", type=click.IntRange(min=1), default=4, show_default=True,
                         help=f"Ray workers ({unit} at a time), with --executor ray."),
            click.option("--ray-address", default=None,
                         help="A Ray cluster to join ('auto': the one this machine is in); default: a local one."),
            click.option("--gpus-per-worker", type=click.FloatRange(0.0), default=0.0, show_default=True,
                         help="GPUs each Ray worker asks for (1 on a GPU cluster)."),
        ]
        for option in reversed(options):
            fn = option(fn)
        return fn

    return deco


def executor_from(kw: dict[str, Any]):
    """The ``Executor`` the options describe (they are removed from ``kw``)."""
    from curate.core.executor import Executor

    return Executor(kw.pop("executor"), kw.pop("workers"), kw.pop("ray_address"), kw.pop("gpus_per_worker"))


def teacher_url_option(fn):
    """``--teacher-base-url URL`` (repeatable): where a ``--teacher openai:MODEL`` is served.

    Every command that takes a teacher has it. The URLs go into the process's environment
    (``curate.embed.api.BASE_URL_ENV``), where every teacher this run builds finds them, in
    this process and in the Ray workers it starts, so no stage's signature has to carry them."""
    def remember(ctx, param, values):
        if values:
            from curate.embed.api import BASE_URL_ENV

            os.environ[BASE_URL_ENV] = " ".join(values)
        return values

    return click.option("--teacher-base-url", "teacher_base_urls", multiple=True, metavar="URL", expose_value=False,
                        callback=remember, help="Server of a --teacher openai:MODEL (its /v1 URL; repeat to "
                                                "spread the requests). The key: $CURATE_TEACHER_API_KEY or "
                                                "$OPENAI_API_KEY.")(fn)
