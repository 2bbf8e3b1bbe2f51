"""Import every filter step so that ``STEPS`` knows them all by name."""

from curate.filter import (  # noqa: F401  (imported for their @register side effect)
    false_negatives,
    granularity,
    heuristics,
    judges,
    minhash_step,
    relabel,
    round_trip,
    sts_gap,
    teacher_rank,
)
from curate.filter.base import STEPS  # noqa: F401
