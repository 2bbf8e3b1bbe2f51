"""``--teacher-base-url``: where a ``--teacher openai:MODEL`` is served, on every command that
takes a teacher (``filter``, ``mine``, ``convert``, ``eval``, ``ablate``, ``pipeline``).

The URLs go into the process's environment (``curate.embed.api.BASE_URL_ENV``) while the
option is parsed, where every teacher the run builds finds them, in this process and in the
Ray workers it starts, so no stage's options have to carry them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from curate.cli.options import options_from


def _remember(ctx, param, values):
    if values:
        from curate.embed.api import BASE_URL_ENV

        os.environ[BASE_URL_ENV] = " ".join(values)
    return values


@dataclass
class TeacherServers:
    base_urls: tuple[str, ...] = field(default=(), metadata={
        "flag": "--teacher-base-url", "metavar": "URL", "callback": _remember, "expose": False,
        "help": "Server of a --teacher openai:MODEL (its /v1 URL; repeat to spread the requests). The key: "
                "$CURATE_TEACHER_API_KEY or $OPENAI_API_KEY."})


teacher_servers = options_from(TeacherServers)
