"""How widely do the teacher's scores spread within a row, against the student's own cosines? (issue 53)

A distillation loss turns each row's scores into a softmax at a temperature: the student's
cosines at ``temperature`` (0.05), the teacher's at ``teacher_temperature``. The two softmaxes have
the same sharpness when each temperature is in proportion to its scores' spread within a row, so
the teacher temperature that matches the student is 0.05 times the ratio of the spreads. This
script measures that ratio on an export's scored rows: the per-row standard deviation of the
``label`` column (the teacher's scores of the positive and each negative) against that of the
untrained student's cosines on the same texts, the median over rows.

    .venv/bin/python bench/teacher_spread.py EXPORT [EXPORT ...] --rows 150 --json bench/results/teacher-spread.json

EXPORT: a folder holding a ``sentence-transformers`` export with a ``label`` column (``curate export``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from curate.export.main import written_files  # noqa: E402
from curate.train.fit import load_student  # noqa: E402

STUDENT_TEMPERATURE = 0.05  # curate.train.fit.Training.temperature


def spread(folder: Path, model, rows: int) -> dict:
    import pyarrow.parquet as pq

    files = [f for f in written_files(folder, "sentence-transformers") if f.name.startswith("train-")]
    table = pq.read_table(files[0]).slice(0, rows)
    if "label" not in table.column_names:
        raise SystemExit(f"{folder}: no label column (export with the teacher's scores)")
    texts = ["positive"] + [c for c in table.column_names if c.startswith("negative")]
    query = model.encode(table.column("anchor").to_pylist(), normalize_embeddings=True, batch_size=64)
    cosines = np.stack([(query * model.encode(table.column(c).to_pylist(), normalize_embeddings=True,
                                              batch_size=64)).sum(1) for c in texts], axis=1)
    labels = np.array(table.column("label").to_pylist(), dtype=np.float64)
    student, teacher = cosines.std(axis=1), labels.std(axis=1)
    ratio = float(np.median(teacher / np.maximum(student, 1e-9)))
    return {"rows": len(labels), "texts_a_row": len(texts), "student_row_std": round(float(np.median(student)), 4),
            "teacher_row_std": round(float(np.median(teacher)), 4), "ratio": round(ratio, 2),
            "matched_teacher_temperature": round(STUDENT_TEMPERATURE * ratio, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="+")
    ap.add_argument("--rows", type=int, default=150, help="rows measured from each export's start")
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--json", default=None)
    ap.add_argument("--about", default=None, help="what the exports are, written into the JSON")
    args = ap.parse_args()
    model = load_student(None)  # the bundled MiniLM, untrained: the student every grid starts from
    model.max_seq_length = args.max_seq_length
    results = {}
    for e in args.exports:
        results[Path(e).name] = spread(Path(e), model, args.rows)
        print(Path(e).name, json.dumps(results[Path(e).name]), flush=True)
    if args.json:
        doc = {"student": "all-MiniLM-L6-v2 (bundled)", "student_temperature": STUDENT_TEMPERATURE,
               "max_seq_length": args.max_seq_length, "machine": f"{os.cpu_count()} CPU cores", "about": args.about, "results": results}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
