"""``--teacher-base-url`` and ``--teacher-timeout``: where a ``--teacher openai:MODEL`` is
served and how long a request to it may wait, on every command that takes a teacher
(``filter``, ``mine``, ``convert``, ``eval``, ``ablate``, ``pipeline``).

Both go into the process's environment (``curate.embed.kinds.api.BASE_URL_ENV`` and ``TIMEOUT_ENV``)
while the option is parsed, where every teacher the run builds finds them, in this process and
in the Ray workers it starts, so no stage's options have to carry them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from curate.cli.options import options_from


def _remember(ctx, param, values):
    if values:
        from curate.embed.kinds.api import BASE_URL_ENV

        os.environ[BASE_URL_ENV] = " ".join(values)
    return values


def _remember_timeout(ctx, param, value):
    if value is not None:
        from curate.embed.kinds.api import TIMEOUT_ENV

        os.environ[TIMEOUT_ENV] = repr(float(value))
    return value


@dataclass
class TeacherServers:
    # its own name: an option named like --base-url's field would be handed --base-url's values
    teacher_base_urls: tuple[str, ...] = field(default=(), metadata={
        "flag": "--teacher-base-url", "metavar": "URL", "callback": _remember, "expose": False,
        "help": "Server of a served model named openai:MODEL (a --teacher, eval's --model, a grid's teacher or "
                "student): its /v1 URL; repeat to spread the requests. The key: "
                "$CURATE_TEACHER_API_KEY or $OPENAI_API_KEY."})
    teacher_timeout: float | None = field(default=None, metadata={
        "flag": "--teacher-timeout", "metavar": "SECONDS", "min": 0, "min_open": True, "max": 86400,
        "callback": _remember_timeout, "expose": False,
        "help": "Seconds a request to a served openai:MODEL may wait for its answer (default 60). It is tried "
                "up to 7 times; a server that answers nothing stops the run after 3 times SECONDS."})


teacher_servers = options_from(TeacherServers)
