"""Turn a placed record into the ``ExportRow`` the writers lay out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from curate.export.inputs import Item
from curate.export.instructions import Instruction
from curate.taskspec import is_symmetric
from curate.export.rows import ExportRow


def build_row(item: Item, split: str, chosen: Sequence[int], levels: Sequence[int], phase: int | None,
              batch: int, instruction: Instruction, extra_meta: dict[str, Any] | None = None) -> ExportRow:
    rec = item.record
    symmetric = is_symmetric(rec)

    def doc(text: str) -> str:
        return instruction.apply(rec.task, text) if symmetric else text

    meta = dict(rec.meta or {})
    meta["export"] = {"input": item.source, **({"dataset": item.dataset} if item.dataset else {}),
                      **(extra_meta or {})}
    return ExportRow(
        record_id=rec.id, split=split, task_type=rec.task_type, task=rec.task, query=rec.query,
        query_text=instruction.apply(rec.task, rec.query), positive=doc(rec.positive),
        negatives=[doc(rec.negatives[k].text) for k in chosen], instruction=instruction.prefix(rec.task),
        symmetric=symmetric, positive_score=rec.teacher.own_positive() if rec.teacher else None,
        negative_scores=[rec.negatives[k].teacher_score for k in chosen], levels=[levels[k] for k in chosen],
        phase=phase, batch=batch, positive_id=rec.positive_id,
        negative_ids=[rec.negatives[k].doc_id for k in chosen],
        more_positives=[(p.text, p.doc_id) for p in rec.positives], meta=meta,
    )
