"""``curate convert``: read the input, convert it, write OUT/converted.jsonl and a summary."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError

KINDS = ("classification", "clustering", "sts")
CONVERTED = "converted.jsonl"
SUMMARY = "convert_summary.json"


def convert_main(kind: str, in_path: Path, out_dir: Path, teacher_name: str | None = None,
                 random_negatives: bool = False, task_text: str | None = None, n_negatives: int = 4,
                 seed: int = 0, min_score: float = 4.0, scale_max: float = 5.0,
                 max_ratio: float | None = 0.95, corpus_path: Path | None = None) -> dict[str, Any]:
    """Convert ``in_path`` and write the records; every input problem is found before any writing."""
    from curate.core.jsonl import atomic_write_json, atomic_write_jsonl
    from curate.core.runner import open_run

    params = {"kind": kind, "teacher": teacher_name, "random_negatives": random_negatives, "task": task_text,
              "negatives": n_negatives, "seed": seed, "min_score": min_score, "scale_max": scale_max,
              "max_ratio": max_ratio}
    if kind not in KINDS:
        raise CurateError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    if teacher_name and random_negatives:
        raise CurateError("--teacher and --random-negatives exclude each other")
    if corpus_path is not None and kind != "sts":
        raise CurateError("--corpus is for --kind sts (classification and clustering draw negatives from the examples)")
    with open_run("convert", out_dir, params, [in_path, corpus_path]) as run:
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
