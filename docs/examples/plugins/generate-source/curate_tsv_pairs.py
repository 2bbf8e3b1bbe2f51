"""A generate input source as a plugin: real (query, positive) pairs from a file of
``QUERY<TAB>POSITIVE`` lines, for which the model writes the graded negatives.

``curate generate --from tsv=pairs.tsv --out OUT`` uses it once this package is installed: its
entry point in the ``curate.generate_sources`` group names this module, and importing the module
registers the source. It plans its items as the shipped ``--from-pairs`` does (the from-pairs
family, its spec and template), so only the reading is its own.
"""

from __future__ import annotations

from curate.core.errors import CurateError
from curate.generate import from_pairs
from curate.generate.source import Source, register_source


def read_tsv(path, opts):
    """One pair a line; a line without exactly one tab is one error naming the file and line."""
    pairs = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            cols = line.rstrip("\n").split("\t")
            if len(cols) != 2 or not all(c.strip() for c in cols):
                raise CurateError(f"{path}:{lineno}: expected QUERY<TAB>POSITIVE")
            pairs.append(from_pairs.Pair(cols[0].strip(), cols[1].strip(), source={"line": lineno}))
    if not pairs:
        raise CurateError(f"{path}: no pairs")
    return pairs


def items(spec, pairs, tasks, planning, stats, out):
    return from_pairs.pair_items(spec, pairs, tasks, planning, stats)


def check_spec(spec):
    if not {"query", "positive"} <= {*spec.inputs, *spec.optional_inputs}:
        raise CurateError(f"--from tsv=FILE needs a spec whose inputs are query and positive (not {spec.family})")


register_source(Source("tsv", from_pairs.FAMILY, "--from tsv=FILE", read_tsv, items, check_spec))
