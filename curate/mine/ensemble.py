"""Several teachers for one file (NV-Retriever, Section 3.2 and Table 2).

* ``cross`` (cross-sample): each query is mined by one teacher only.  ``hash`` picks it
  from the run's seed and the query's key (independent of the order of the file);
  ``roundrobin`` deals queries to teachers in file order (exactly balanced).
* ``intra`` (intra-sample): every teacher mines every query; the negatives are taken one
  per teacher in turn (each teacher's best, then each one's second, ...), teachers in the
  order given (the paper orders them by accuracy).  With ``dedup`` a document another
  teacher already gave is skipped in favour of that teacher's next one; without it the
  same document may appear twice (the paper's better variant: agreement weighs more).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from curate.core.errors import CurateError

ENSEMBLES = ("intra", "cross")
CROSS_ASSIGN = ("hash", "roundrobin")


@dataclass(frozen=True)
class Pick:
    teacher: int
    doc: int
    score: float
    rank: int


def assign_cross(keys: Sequence[str], n_teachers: int, seed: int = 0, how: str = "hash") -> list[int]:
    """The teacher (index) of each query in a cross-sample ensemble."""
    if how not in CROSS_ASSIGN:
        raise CurateError(f"unknown --cross-assign {how!r} (choose from {', '.join(CROSS_ASSIGN)})")
    if n_teachers < 1:
        raise ValueError("at least one teacher")
    if how == "roundrobin":
        return [i % n_teachers for i in range(len(keys))]
    out = []
    for key in keys:
        digest = hashlib.sha256(f"{int(seed)}\x00{key}".encode("utf-8", "surrogatepass")).digest()
        out.append(int.from_bytes(digest[:8], "big") % n_teachers)
    return out


def interleave(lists: Sequence[Sequence[Pick]], k: int, dedup: bool) -> list[Pick]:
    """Up to ``k`` picks, one per teacher in turn (intra-sample ensembling)."""
    out: list[Pick] = []
    seen: set[int] = set()
    cursor = [0] * len(lists)
    while len(out) < k:
        progressed = False
        for t, picks in enumerate(lists):
            if len(out) >= k:
                break
            while dedup and cursor[t] < len(picks) and picks[cursor[t]].doc in seen:
                cursor[t] += 1
            if cursor[t] < len(picks):
                out.append(picks[cursor[t]])
                seen.add(picks[cursor[t]].doc)
                cursor[t] += 1
                progressed = True
        if not progressed:
            break
    return out
