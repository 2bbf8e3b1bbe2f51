"""``curate convert``: read the input, convert it, write OUT/converted.jsonl and a summary."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.params import field_range, range_problem
from curate.core.stage import STAGES, Stage
from curate.negatives.knobs import Ceiling

KINDS = ("classification", "clustering", "sts")
CONVERTED = "converted.jsonl"


@dataclass(kw_only=True)
class ConvertOptions:
    kind: str = field(metadata={  # classification, clustering or sts
        "choices": KINDS,
        "help": "What the input holds: labelled examples (a cluster id is a label) or scored sentence pairs."})
    inp: str = field(metadata={
        "flag": "--in", "path": "file",
        "help": "JSONL: {\"text\", \"label\"} lines, or {\"sentence1\", \"sentence2\", \"score\"} for sts."})
    out: str = field(metadata={"path": "dir", "help": "Folder for converted.jsonl, report.json and run.json."})
    teacher: str | None = field(default=None, metadata={  # "bundled" or a model: the hardest negatives by it
        "flag_value": "bundled", "metavar": "[MODEL]",
        "help": "Pick the hardest negatives with this teacher (bare --teacher: the bundled all-MiniLM-L6-v2). "
                "Default: random for classification/clustering, the bundled teacher for sts."})
    random_negatives: bool = field(default=False, metadata={"help": "Draw negatives at random, sts included."})
    task: str | None = field(default=None, metadata={  # the task instruction every record gets
        "flag": "--task-text", "help": "The task instruction every record gets (default: one per kind)."})
    negatives: int = field(default=4, metadata={"min": 1, "help": "Negatives per record."})
    seed: int = field(default=0, metadata={"help": "Seed for every per-example draw."})
    min_score: float = field(default=4.0, metadata={  # sts: pairs scoring at least this become records
        "help": "sts: pairs scoring at least this become records (in the data's own units)."})
    scale_max: float = field(default=5.0, metadata={  # sts: the top of the data's score scale
        "min": 0, "min_open": True, "help": "sts: the top of the data's score scale (scores must lie in [0, this])."})
    max_ratio: float | None = field(default=0.95, metadata={  # sts with a teacher: the positive-aware ceiling
        **field_range(Ceiling, "percent"),
        "help": "sts with a teacher: skip negatives the teacher scores above this fraction of the positive."})
    corpus: str | None = field(default=None, metadata={  # sts: draw negatives from these texts
        "path": "file",
        "help": "sts: draw negatives from these texts (JSONL with 'text') instead of the input's sentences."})


def check(opts: ConvertOptions) -> None:
    """Every option, before anything starts."""
    if opts.kind not in KINDS:
        raise CurateError(f"unknown kind {opts.kind!r} (known: {', '.join(KINDS)})")
    if opts.teacher and opts.random_negatives:
        raise CurateError("--teacher and --random-negatives exclude each other")
    problem = range_problem(field_range(Ceiling, "percent"), opts.max_ratio) if opts.max_ratio is not None else None
    if problem:
        raise CurateError(f"--max-ratio {opts.max_ratio}: {problem} (a share of the positive's score)")
    if opts.corpus and opts.kind != "sts":
        raise CurateError("--corpus is for --kind sts (classification and clustering draw negatives from the examples)")


def convert_stage(opts: ConvertOptions, run) -> dict[str, Any]:
    """Convert the input into ``run``'s folder; every input problem is found before any writing."""
    from curate.core.jsonl import atomic_write_jsonl

    kind, in_path, teacher_name = opts.kind, Path(opts.inp), opts.teacher
    random_negatives, task_text, n_negatives, seed = opts.random_negatives, opts.task, opts.negatives, opts.seed
    min_score, scale_max, max_ratio = opts.min_score, opts.scale_max, opts.max_ratio
    corpus_path = Path(opts.corpus) if opts.corpus else None
    started = time.monotonic()
    stats: dict[str, Any] = {}
    if kind == "sts":
        from curate.convert.readers import read_sts_pairs
        from curate.convert.sts import DEFAULT_TASK, sts_pairs_to_records

        pairs = read_sts_pairs(in_path, scale_max)
        corpus = None
        if corpus_path is not None:
            from curate.datasets.corpus import read_corpus

            corpus = [text for _, text in read_corpus(corpus_path)]
        # STS negatives are mined (NV-Embed): the bundled teacher unless told otherwise
        teacher = None if random_negatives else _teacher(teacher_name or "bundled")
        task = task_text or DEFAULT_TASK
        records = sts_pairs_to_records(pairs, task, min_score, scale_max, corpus, teacher, n_negatives,
                                       seed, max_ratio, stats)
    else:
        from curate.convert.labeled import DEFAULT_TASKS, examples_to_triplets
        from curate.convert.readers import read_labeled

        texts, labels = read_labeled(in_path)
        teacher = _teacher(teacher_name) if teacher_name else None
        task = task_text or DEFAULT_TASKS[kind]
        records = examples_to_triplets(texts, labels, task, n_negatives, seed, teacher, kind=kind, stats=stats)
    if not records:
        raise CurateError(f"{in_path}: nothing to convert ({_why(stats)})")
    summary = {"kind": kind, "input": str(in_path), "task": task, "negatives": n_negatives, "seed": seed,
               "negatives_by": "teacher" if teacher is not None else "random",
               **({"teacher": teacher.stats()} if teacher is not None else {}),
               **stats, "wall_seconds": round(time.monotonic() - started, 3)}
    atomic_write_jsonl(run.path(CONVERTED), [r.to_dict() for r in records])
    run.counts.update({"records_out": len(records)})
    return summary


def run_convert(opts: ConvertOptions) -> dict[str, Any]:
    """Convert through the stage runner (as ``curate convert`` does, printing nothing); the report."""
    from curate.core.stage import run_stage

    return run_stage(STAGE, opts, quiet=True)[0]


def summary(report: dict[str, Any], out: Path) -> list[str]:
    return [f"{report['kind']}: {report['records']} records in {out / CONVERTED}"]


STAGE = Stage("convert", ConvertOptions, convert_stage, check=check, reads=("inp", "corpus"),
              writes={"records": CONVERTED}, summary=summary)
STAGES.register(STAGE.name, STAGE)


def _teacher(name: str):
    from curate.embed.teacher import Teacher

    return Teacher(name)


def _why(stats: dict[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in stats.items() if isinstance(v, int) and not isinstance(v, bool)]
    skipped = stats.get("skipped") or {}
    parts += [f"skipped {k} {v}" for k, v in skipped.items() if v]
    return ", ".join(parts) or "no records"
