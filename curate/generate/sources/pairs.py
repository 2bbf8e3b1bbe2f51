"""``--from-pairs``: real (query, positive) pairs, a JSONL file or a BEIR folder's split; the
model writes only the graded negatives (``curate.generate.from_pairs``)."""

from __future__ import annotations

from curate.core.errors import CurateError
from curate.generate import from_pairs
from curate.generate.source import Source, register_source


def _check_spec(spec) -> None:
    if not {"query", "positive"} <= {*spec.inputs, *spec.optional_inputs}:
        raise CurateError(f"--from-pairs needs a spec whose 'inputs' are query and positive "
                          f"({spec.family} asks the model for them)")


def _items(spec, pairs, tasks, planning, stats, out):
    return from_pairs.pair_items(spec, pairs, tasks, planning, stats)


register_source(Source("pairs", from_pairs.FAMILY, "--from-pairs", lambda path, opts: from_pairs.read_pairs(
    path, opts.split), _items, _check_spec))
