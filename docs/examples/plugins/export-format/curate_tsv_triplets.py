"""An export format as a plugin: ``tsv-triplets``, one (query, positive, negative) line per negative.

``curate export --format tsv-triplets`` writes ``train.tsv`` and ``dev.tsv`` once this package is
installed: its entry point in the ``curate.export_formats`` group names this module, and
importing the module registers the writer together with its usage, the paragraph the card of a
several-format export gives it under "Training".
"""

from __future__ import annotations

import csv
from pathlib import Path

from curate.export.formats import register_format
from curate.export.formats.common import atomic_path, split_indices


def usage(settings, where: str) -> str:
    """How to train on the files in ``where`` (``settings``: numbers measured on the rows)."""
    return (f"**TSV triplets** (`{where}`): `train.tsv` and `dev.tsv`, a header and one "
            f"(query, positive, negative) line per negative, {settings.negatives_per_row} a query at most; "
            f"`datasets.load_dataset(\"csv\", data_files=\"{where}/train.tsv\", delimiter=\"\\t\")` "
            "reads them for a triplet loss.")


@register_format("tsv-triplets", usage)
def write_tsv_triplets(rows, out_dir: Path, card: dict) -> list[Path]:
    """Every row's negatives, each on a line of its own, rows in training order; returns the files."""
    written = []
    for split, idx in split_indices(rows).items():
        path = Path(out_dir) / f"{split}.tsv"
        with atomic_path(path) as tmp:  # a finished file renamed into place: never half there
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                out = csv.writer(fh, delimiter="\t", lineterminator="\n")
                out.writerow(["query", "positive", "negative"])
                for i in idx:
                    out.writerows([rows[i].query_text, rows[i].positive, neg] for neg in rows[i].negatives)
        written.append(path)
    return written
