"""Progress where no terminal draws a bar: plain lines with the count and an ETA."""

from __future__ import annotations

from curate.core.progress import PLAIN_EVERY_ENV, plain_line, track


def test_work_logged_to_a_file_says_how_far_it_is_and_how_long_is_left(monkeypatch, capsys):
    """stderr captured (not a terminal): every advance past the interval writes one plain line; the
    last item writes none (the stage's own summary says it ended)."""
    monkeypatch.setenv(PLAIN_EVERY_ENV, "0")
    with track(4, "encoding") as advance:
        for _ in range(4):
            advance()
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["encoding: 1/4 (25%)", "encoding: 2/4 (50%)", "encoding: 3/4 (75%)"]
    assert all("so far, about " in ln and ln.endswith(" left") for ln in lines)


def test_a_short_piece_of_work_writes_nothing(monkeypatch, capsys):
    monkeypatch.setenv(PLAIN_EVERY_ENV, "30")
    with track(3, "encoding") as advance:
        for _ in range(3):
            advance()
    assert capsys.readouterr().err == ""


def test_the_estimate_follows_the_rate_so_far():
    assert plain_line("training", 10, 40, 90.0) == "training: 10/40 (25%), 1 min 30 s so far, about 4 min 30 s left"
    assert plain_line("search", 1, 3, 7200.0).endswith("2 h 0 min so far, about 4 h 0 min left")
