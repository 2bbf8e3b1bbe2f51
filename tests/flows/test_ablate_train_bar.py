"""ablate's training bar: the trainer callback moves it one optimiser step at a time."""

from __future__ import annotations

from curate.train.fit import _steps_callback


def test_the_callback_advances_the_bar_once_per_step():
    steps = []
    callback = _steps_callback(lambda n=1: steps.append(n))
    for _ in range(3):
        callback.on_step_end(args=None, state=None, control=None)
    assert steps == [1, 1, 1]
