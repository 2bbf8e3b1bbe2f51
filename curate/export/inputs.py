"""Read the export's inputs: records from every ``--in``, with where each came from.

Each record is tagged with its input file and a dataset name: records that ``curate mine``
built from a dataset (BEIR folder, pairs file, Hugging Face set) all share one task text,
so the dataset name is what tells two such inputs apart when batches are made per task.
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

# ``meta["source"]`` values that ``curate mine`` writes on records it creates from a dataset.
MINED_SOURCES = ("beir", "pairs", "hf")


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


def _filter_summary(rep: dict[str, Any]) -> dict[str, Any]:
    return {
        "recipe": (rep.get("recipe") or {}).get("name"),
        "records_in": rep.get("records_in"), "records_kept": rep.get("records_kept"),
        "negatives_in": rep.get("negatives_in"), "negatives_kept": rep.get("negatives_kept"),
        "steps": [{"step": s.get("step"), "records_dropped": s.get("records_dropped"),
                   "negatives_dropped": s.get("negatives_dropped")} for s in rep.get("steps") or []],
    }


def _mine_summary(rep: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": rep.get("input"), "method": rep.get("method"), "k": rep.get("k"),
        "sampling": rep.get("sampling"), "teachers": [t.get("model") for t in rep.get("teachers") or []],
        "queries_in": rep.get("queries_in"), "queries_out": rep.get("queries_out"),
        "negatives": rep.get("negatives"), "false_negatives": rep.get("false_negatives"),
        # what the records' scores are, where not the teacher's cosine (mine --scores hybrid)
        **({"scores": rep["scores_from"]} if (rep.get("scores_from") or {}).get("kind") not in (None, "teacher")
           else {}),
    }


def _dataset_name(mine_report: dict[str, Any] | None, path: Path) -> str:
    """A short name for the dataset mined records came from: the BEIR folder / file / hub name."""
    src = (mine_report or {}).get("input") or {}
    name = src.get("name") or src.get("path")
    if name and src.get("kind") != "records":
        return Path(str(name)).name or str(name)
    return path.parent.name or path.stem


def _reports_beside(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The mine or filter report of the run that wrote ``path`` (its ``run.json`` names the stage)."""
    from curate.core.stage import stage_report

    stage, report = stage_report(path.parent)
    if report is not None and stage in ("mine", "filter"):
        return (report, None) if stage == "mine" else (None, report)
    return None, None


def load_inputs(paths: list[str | Path]) -> tuple[list[Item], list[Source]]:
    """Every record of every input, in input order; a record id seen before is skipped (counted)."""
    items: list[Item] = []
    sources: list[Source] = []
    seen: set[str] = set()
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise CurateError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
        records = read_records(path)
        mine_rep, filter_rep = _reports_beside(path)
        src = Source(path=str(path))
        if filter_rep:
            src.reports["filter_report"] = _filter_summary(filter_rep)
        if mine_rep:
            src.reports["mine_report"] = _mine_summary(mine_rep)
        records, repeats = first_of_each_id(records, seen)
        src.duplicates_skipped += len(repeats)
        src.skipped += [r.id for r in repeats]
        for rec in records:
            dataset = ""
            if (rec.meta or {}).get("source") in MINED_SOURCES:
                dataset = src.dataset = _dataset_name(mine_rep, path)
            items.append(Item(rec, str(path), dataset))
            src.records += 1
        sources.append(src)
    return items, sources
