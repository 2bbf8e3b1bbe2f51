"""Read the export's inputs: records from every ``--in``, with where each came from.

Each record is tagged with its input file and a dataset name: records that a stage built from
a dataset (``curate mine`` from a BEIR folder, pairs file or Hugging Face set; each stage declares
the ``meta["source"]`` values it writes so, ``Stage.dataset_sources``) all share one task text, so
the dataset name is what tells two such inputs apart when batches are made per task.
Summaries of the report of the filter or mine run that wrote an input (``report.json`` beside
it) go to the dataset card, so the card says how the data was made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.records import Record, first_of_each_id, read_records


@dataclass
class Item:
    """A record on its way through the export, with its provenance."""

    record: Record
    source: str  # the input file it was read from
    dataset: str = ""  # dataset name for records mined from a dataset, else ""
    # Filled in as the export goes, each by the step that decides it:
    levels: list[int] = field(default_factory=list)  # each negative's level, 1 hardest (levels.assign_levels)
    split: str = "train"  # or "dev" (splits.split_dev)
    batch: int = 0  # batch number within the split (curriculum.order, from batching.schedule)
    batch_kind: str = ""  # task, mixed or last (batching.Batch.kind)
    phase: int | None = None  # 1-based curriculum phase of a training row under a phased curriculum
    chosen: list[int] = field(default_factory=list)  # indices of the negatives the row carries (curriculum.order)
    target: int | None = None  # the level the row's negatives aimed at (None: hardest first)

    @cached_property
    def task_key(self) -> str:
        """The unit that homogeneous batches and the by-task dev split work with.

        Generated records: family + task text (one brainstormed task = one task). Records
        mined from a dataset: the dataset name as well, since they all share one default task text.
        """
        return "\x1f".join((self.record.task_type, self.record.task, self.dataset))


@dataclass
class Source:
    path: str
    records: int = 0
    duplicates_skipped: int = 0
    dataset: str = ""
    reports: dict[str, Any] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # ids of the records skipped as duplicates (not in the card)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "records": self.records, "duplicates_skipped": self.duplicates_skipped,
                **({"dataset": self.dataset} if self.dataset else {}), **self.reports}


def _provenance(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """What the stage that wrote ``path`` says a later export should record of its run (its
    ``Stage.provenance``; its ``run.json`` names the stage), and the stage's name."""
    from curate.core.stage import STAGES, stage_report

    stage, report = stage_report(path.parent)
    if report is None or stage not in STAGES or STAGES.get(stage).provenance is None:
        return None, None
    return stage, STAGES.get(stage).provenance(report)


def load_inputs(paths: list[str | Path]) -> tuple[list[Item], list[Source]]:
    """Every record of every input, in input order; a record id seen before is skipped (counted)."""
    from curate.core.stage import dataset_sources

    from_dataset = dataset_sources()
    items: list[Item] = []
    sources: list[Source] = []
    seen: set[str] = set()
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise CurateError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
        records = read_records(path)
        stage, provenance = _provenance(path)
        src = Source(path=str(path))
        named = (provenance or {}).pop("dataset", None)  # the data the records came from, where it says
        if provenance is not None:
            src.reports[f"{stage}_report"] = provenance
        records, repeats = first_of_each_id(records, seen)
        src.duplicates_skipped += len(repeats)
        src.skipped += [r.id for r in repeats]
        for rec in records:
            dataset = ""
            if (rec.meta or {}).get("source") in from_dataset:
                dataset = src.dataset = named or path.parent.name or path.stem
            items.append(Item(rec, str(path), dataset))
            src.records += 1
        sources.append(src)
    return items, sources
