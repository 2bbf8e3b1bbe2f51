"""A filter step as a plugin: drop records whose query is shorter than ``min_words`` words.

A recipe names it like a shipped step (``- short_query: {min_words: 4}``) once this package is
installed: its entry point in the ``curate.filter_steps`` group names this module, and importing
the module registers the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from curate.filter.base import register


@dataclass
class ShortQueryParams:
    # the one home of the defaults; a recipe's values are checked against it when it loads
    min_words: int = field(default=5, metadata={"min": 1})


# kind="map": each record is decided on its own, so --executor ray may shard the step
@register("short_query", ShortQueryParams, kind="map")
def short_query(records, params, ctx):
    p = ShortQueryParams(**params)
    kept = []
    for rec in records:
        words = len(rec.query.split())
        if words < p.min_words:
            ctx.reject(rec, "short-query", {"words": words})  # lands in rejected.jsonl, counted in the report
        else:
            kept.append(rec)
    return kept
