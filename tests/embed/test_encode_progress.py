"""The teacher's encoding bar: drawn for more than one block of texts, and only drawn (the vectors
are the very same bytes with it and without it)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from curate.core import progress
from curate.embed.teacher import Teacher


@pytest.fixture(scope="module")
def teacher():
    return Teacher(cache=False, batch_size=2)  # blocks of 16 texts: 150 texts take ten


def test_encode_bar_shows_progress_and_changes_no_vector(teacher, monkeypatch):
    texts = [f"passage {i} about topic {i % 7}, with {'more ' * (i % 5)}words" for i in range(150)]
    monkeypatch.setitem(progress._bars, "quiet", False)

    monkeypatch.setattr(progress, "console", Console(file=io.StringIO(), force_terminal=False))
    plain = teacher.encode_docs(texts)

    drawn = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=drawn, force_terminal=True, width=160))
    with_bar = teacher.encode_docs(texts)

    assert "encoding with" in drawn.getvalue() and "150/150" in drawn.getvalue()
    assert with_bar.dtype == plain.dtype and with_bar.shape == (150, teacher.dim)
    assert np.array_equal(with_bar, plain)  # bit for bit
    assert "Batches" not in drawn.getvalue()  # no sentence-transformers bar beside it


def test_one_block_draws_no_bar(teacher, monkeypatch):
    monkeypatch.setitem(progress._bars, "quiet", False)
    drawn = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=drawn, force_terminal=True, width=160))
    teacher.encode_docs([f"text {i}" for i in range(10)])
    assert drawn.getvalue() == ""


def test_in_a_log_the_count_moves_block_by_block(teacher, monkeypatch):
    """Without a terminal a plain line is written (here: after every block, interval 0): the count
    moves long before the end (eval's bar once sat at 0 of 2196 while its first block encoded)."""
    monkeypatch.setitem(progress._bars, "quiet", False)
    monkeypatch.setenv(progress.PLAIN_EVERY_ENV, "0")
    log = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=log, force_terminal=False, width=200))
    teacher.encode_docs([f"another passage {i}, {'long ' * (i % 9)}" for i in range(150)])
    counts = [int(line.split(": ")[1].split("/")[0]) for line in log.getvalue().splitlines() if "encoding with" in line]
    assert counts[:2] == [16, 32] and len(counts) == 9, log.getvalue()
