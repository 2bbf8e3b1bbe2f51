"""The ``fit`` stage: a student fine-tuned on a folder's training rows, and nothing else.

``curate train`` and every trained cell of ``curate ablate`` fit through it, so a fine-tune is
skipped when done and named by what it trains on: the bytes of the training Parquet files
(never their folder's path), the student, the budget, the seed and how the rows train. Two
folders holding the same rows (two arms whose exports came out byte for byte the same) are one
fit. The rows are read from a folder whose report lists its ``sentence-transformers`` files, as
an export's does and the baseline stage's (``curate.flows.ablate.st``) does too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.hashing import file_digest, value_digest
from curate.core.stage import STAGES, Stage
from curate.train.fit import Budget, Training, fine_tune

FORMAT = "sentence-transformers"  # the format whose files are the rows
MODEL = "model"


@dataclass
class FitOptions:
    # the folder of the rows (an export's, or the baseline's): known by its files' bytes, not its path
    rows: str = field(metadata={"path": "dir", "fingerprint": False})
    out: str = field(metadata={"path": "dir"})
    base: str | None = None  # the student (None: the bundled MiniLM)
    budget: Budget = field(default_factory=Budget)
    seed: int = 0
    in_order: bool = True  # the rows' file order (an export's curriculum), else shuffled no-duplicates batches
    training: dict[str, Any] = field(default_factory=dict)  # ``Training.changed()``: only what differs
    guide: str | None = field(default=None, metadata={"fingerprint": "if-set"})  # a masked loss's teacher


def train_files(folder: str | Path) -> list[Path]:
    """The training Parquet files a finished run in ``folder`` lists for ``FORMAT`` (none: no
    finished run there)."""
    from curate.export.main import written_files

    return sorted(f for f in written_files(folder, FORMAT) if f.name.startswith("train-") and f.suffix == ".parquet")


def data_digest(files: list[Path]) -> str:
    """The rows as bytes, as results have recorded them (one file: its SHA-256's start)."""
    if len(files) == 1:
        return file_digest(files[0])[:16]
    return value_digest([file_digest(f) for f in files], length=16)


def check(opts: FitOptions) -> None:
    if not train_files(opts.rows):
        raise CurateError(f"{opts.rows}: no training rows (no {FORMAT} train-*.parquet listed in its report)")


def training_of(opts: FitOptions) -> Training:
    return Training(**{k: v for k, v in opts.training.items() if k != "revision"})


def run(opts: FitOptions, run) -> dict[str, Any]:
    import datasets

    datasets.disable_progress_bars()  # curate's own training bar stays
    files = train_files(opts.rows)
    rows = datasets.load_dataset("parquet", data_files=[str(f) for f in files], split="train")
    trained = fine_tune(opts.base, rows, opts.budget, opts.seed, opts.in_order, run.path(MODEL),
                        training_of(opts), opts.guide)
    run.counts.update({"rows": trained["rows"], "steps": trained["steps"]})
    return {"training": {**trained, "data_sha256": data_digest(files)}, "model": MODEL,
            "files": [f.name for f in files], "fingerprint": run.fingerprint}


def summary(report: dict[str, Any], folder: Path) -> list[str]:
    t = report["training"]
    return [f"fit: {t['steps']} steps on {t['rows']} rows ({t['loss']}, {t['train_s']:.0f} s) -> {folder / MODEL}"]


STAGE = Stage("fit", FitOptions, run, check=check, also_reads=lambda opts: train_files(opts.rows),
              writes={"model": MODEL}, summary=summary)
STAGES.register(STAGE.name, STAGE)
