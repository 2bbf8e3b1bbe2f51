"""``curate convert``: read the input, convert it, write OUT/converted.jsonl and a summary."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.params import field_range, range_problem
from curate.negatives.knobs import Ceiling

KINDS = ("classification", "clustering", "sts")
CONVERTED = "converted.jsonl"
SUMMARY = "convert_summary.json"


@dataclass(kw_only=True)
class ConvertOptions:
    kind: str  # classification, clustering or sts
    inp: str
    out: str
    teacher: str | None = None  # "bundled" or a model: the hardest negatives by this teacher
    random_negatives: bool = False
    task: str | None = None  # the task instruction every record gets (default: one per kind)
    negatives: int = 4
    seed: int = 0
    min_score: float = 4.0  # sts: pairs scoring at least this become records
    scale_max: float = 5.0  # sts: the top of the data's score scale
    max_ratio: float | None = 0.95  # sts with a teacher: the positive-aware ceiling
    corpus: str | None = None  # sts: draw negatives from these texts


def convert_main(opts: ConvertOptions) -> dict[str, Any]:
    """Convert the input and write the records; every input problem is found before any writing."""
    from curate.core.jsonl import atomic_write_json, atomic_write_jsonl
    from curate.core.runner import open_run

    kind, in_path, out_dir, teacher_name = opts.kind, Path(opts.inp), Path(opts.out), opts.teacher
    random_negatives, task_text, n_negatives, seed = opts.random_negatives, opts.task, opts.negatives, opts.seed
    min_score, scale_max, max_ratio = opts.min_score, opts.scale_max, opts.max_ratio
    corpus_path = Path(opts.corpus) if opts.corpus else None
    params = {k: v for k, v in asdict(opts).items() if k not in ("inp", "out", "corpus")}
    if kind not in KINDS:
        raise CurateError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    if teacher_name and random_negatives:
        raise CurateError("--teacher and --random-negatives exclude each other")
    problem = range_problem(field_range(Ceiling, "percent"), max_ratio) if max_ratio is not None else None
    if problem:
        raise CurateError(f"--max-ratio {max_ratio}: {problem} (a share of the positive's score)")
    if corpus_path is not None and kind != "sts":
        raise CurateError("--corpus is for --kind sts (classification and clustering draw negatives from the examples)")
    with open_run("convert", out_dir, params, [in_path, corpus_path], writes=(CONVERTED, SUMMARY)) as run:
        started = time.monotonic()
        stats: dict[str, Any] = {}
        if kind == "sts":
            from curate.convert.readers import read_sts_pairs
            from curate.convert.sts import DEFAULT_TASK, sts_pairs_to_records

            pairs = read_sts_pairs(in_path, scale_max)
            corpus = None
            if corpus_path is not None:
                from curate.corpus import read_corpus

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
        atomic_write_json(run.path(SUMMARY), summary)
        run.counts.update({"records_out": len(records)})
    return summary


def _teacher(name: str):
    from curate.embed.teacher import Teacher

    return Teacher(name)


def _why(stats: dict[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in stats.items() if isinstance(v, int) and not isinstance(v, bool)]
    skipped = stats.get("skipped") or {}
    parts += [f"skipped {k} {v}" for k, v in skipped.items() if v]
    return ", ".join(parts) or "no records"
