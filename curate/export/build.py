"""Turn a placed record into the ``ExportRow`` the writers lay out."""

from __future__ import annotations

from curate.export.inputs import Item
from curate.export.instructions import Instruction
from curate.llm.taskspec import is_symmetric
from curate.export.rows import ExportRow


def build_row(item: Item, instruction: Instruction, source: str) -> ExportRow:
    """The row of an item the curriculum has placed (split, phase, batch and negatives set);
    ``source``: its input file as the export names it (relative to the export, or a name)."""
    rec, chosen, levels = item.record, item.chosen, item.levels
    symmetric = is_symmetric(rec)

    def doc(text: str) -> str:
        return instruction.apply(rec.task, text) if symmetric else text

    meta = dict(rec.meta or {})
    meta["export"] = {"input": source, **({"dataset": item.dataset} if item.dataset else {}),
                      "target_level": item.target, "batch_kind": item.batch_kind}
    return ExportRow(
        record_id=rec.id, split=item.split, task_type=rec.task_type, task=rec.task, query=rec.query,
        query_text=instruction.apply(rec.task, rec.query), positive=doc(rec.positive),
        negatives=[doc(rec.negatives[k].text) for k in chosen], instruction=instruction.prefix(rec.task),
        symmetric=symmetric, positive_score=rec.teacher.own_positive() if rec.teacher else None,
        negative_scores=[rec.negatives[k].teacher_score for k in chosen], levels=[levels[k] for k in chosen],
        phase=item.phase, batch=item.batch, positive_id=rec.positive_id,
        negative_ids=[rec.negatives[k].doc_id for k in chosen],
        more_positives=[(p.text, p.doc_id) for p in rec.positives], meta=meta,
        titles={text: title for text, title in ((rec.positive, rec.positive_title),
                                                *((p.text, p.title) for p in rec.positives),
                                                *((rec.negatives[k].text, rec.negatives[k].title) for k in chosen))
                if title},
    )
