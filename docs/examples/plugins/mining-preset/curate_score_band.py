"""A mining preset as a plugin: ``score-band``, candidates the teacher scores between 0.3 and a ceiling.

Below the band a candidate is too easy to teach anything; above it, it may well be an unlabelled
positive. ``curate mine --method score-band [--max-score 0.75]`` uses it once this package is
installed (its entry point in the ``curate.presets`` group names this module), or without
installing: ``curate mine --preset-module curate_score_band.py --method score-band``.
"""

from __future__ import annotations

from curate.negatives.presets import preset
from curate.negatives.select import Thresholds

FLOOR = 0.3  # --min-score replaces it, as it does every preset's floor


# the knobs it takes, with their defaults: here --max-score, 0.8 unless given
@preset("score-band", {"max_score": 0.8})
def score_band(knobs):
    """Candidates scoring from FLOOR up to ``max_score``, best first."""
    return Thresholds(max_score=float(knobs["max_score"]), min_score=FLOOR)
