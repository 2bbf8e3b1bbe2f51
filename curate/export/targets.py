"""Distillation targets that agree with the labels, and the rows where the teacher disagrees.

A row's positive is the text its contrastive loss must rank first. When the teacher scores one of
the row's negatives at or above that positive (a hybrid teacher does so on a quarter to a half of
labelled rows), a target built from the raw scores teaches the student to put that negative first,
against the label: the two parts of a combined loss then pull apart. Either the teacher is wrong
(then the target must follow the label) or the labels missed a relevant document (then the
negative is a false-negative candidate for ``relabel``); in neither case is the raw order a target.

So the sentence-transformers ``label`` column (the target curate's own losses train on) lifts such
a positive to ``LIFT`` above the row's best negative, leaving every negative's score as the teacher
gave it: the teacher's order among the negatives, which is what distillation adds, is kept whole.
Lifting was chosen over leaving the contradicted negative out of the target because every column
of a row must carry a score (a missing one would be -inf to a KL, and infinite to MarginMSE). The
other formats keep the teacher's raw scores (``hf``: the facts), and the card counts the
contradicted rows and names a few, so they can go to ``relabel``. ``export --targets teacher``
writes the raw scores into ``label`` too: the lift's ablation arm, not a recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# How far above the row's best negative a contradicted positive's target goes: a hundredth of a
# cosine, small against a row's spread of scores, yet a strict order under any temperature.
LIFT = 0.01
EXAMPLES = 5  # record ids the card names
TARGETS = ("labels", "teacher")  # export --targets: the label column lifted to agree, or as the teacher gave it


def lifts(params: dict[str, Any]) -> bool:
    """Whether an export's ``label`` targets are lifted to agree (``--targets labels``), read from the
    parameters its card records (a default export leaves ``targets`` out of them)."""
    return params.get("targets", TARGETS[0]) == "labels"


def agreeing_positive(positive: float, negatives: list[float]) -> float:
    """The positive's target score: its own, or ``LIFT`` above the best negative when that is not below it."""
    top = max(negatives, default=None)
    return positive if top is None or positive > top else top + LIFT


def contradicted(row) -> bool | None:
    """Whether the teacher scores one of ``row``'s own negatives at or above its positive (None: a
    score is missing, or the row has no negative)."""
    scores = list(row.negative_scores)
    if row.positive_score is None or not scores or any(s is None for s in scores):
        return None
    return max(scores) >= row.positive_score


@dataclass
class Disagreement:
    """The card's count of rows whose teacher put a negative at or above the positive."""

    rows_scored: int = 0
    false_negative_candidates: int = 0
    examples: list[str] = field(default_factory=list)  # their record ids, the first few
    lifted: bool = True  # export --targets labels (the default); False: --targets teacher

    def card(self) -> dict[str, Any]:
        target = (f"in the sentence-transformers label, the positive's score lifted to {LIFT} above the row's best "
                  "negative on these rows (the other formats keep the raw scores)" if self.lifted else
                  "the teacher's raw scores in every format (export --targets teacher): on these rows the label "
                  "ranks a negative at or above the positive, against the contrastive loss")
        return {"rows_scored": self.rows_scored, "false_negative_candidates": self.false_negative_candidates,
                "examples": self.examples, "lifted": self.lifted,
                "target": f"{target}; a candidate is the teacher's error or a relevant document the labels missed "
                          "(relabel can judge it)"}


def disagreement(rows, lifted: bool = True) -> dict[str, Any]:
    """The card's entry (``label_targets``) for the export's rows; empty when no row is scored."""
    found = Disagreement(lifted=lifted)
    for row in rows:
        verdict = contradicted(row)
        if verdict is None:
            continue
        found.rows_scored += 1
        if verdict:
            found.false_negative_candidates += 1
            if len(found.examples) < EXAMPLES:
                found.examples.append(row.record_id)
    return {"label_targets": found.card()} if found.rows_scored else {}
