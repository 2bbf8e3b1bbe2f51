"""A record whose teacher block has a score but no rank (and no negatives) is scored again by the
teacher, not read as scored: `curate filter`'s default recipe ended in a TypeError on it (issue 52)."""

from __future__ import annotations

import json

from tests.helpers import read_jsonl, run_curate

TASK = "Given a question, retrieve passages that answer it."


def test_a_teacher_block_without_a_rank_is_scored_again(tmp_path):
    records = [
        {"id": "a", "task_type": "retrieval", "task": TASK, "query": "what lowers blood pressure in adults?",
         "positive": "Regular aerobic exercise lowers resting blood pressure in adults with hypertension.",
         "negatives": [], "teacher": {"model": "sentence-transformers/all-MiniLM-L6-v2", "positive": 0.61}},
        {"id": "b", "task_type": "retrieval", "task": TASK, "query": "how do vaccines train the immune system?",
         "positive": "Vaccines expose the immune system to an antigen so that memory cells form without disease.",
         "negatives": [{"text": "The immune system has innate and adaptive branches.", "level": 1}]},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = run_curate("filter", "--in", str(src), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    kept = {r["id"]: r for r in read_jsonl(tmp_path / "out" / "filtered.jsonl")}
    # scored afresh: the rank is there now, from the teacher, and the stale block's score is gone
    assert isinstance(kept["a"]["teacher"]["positive_rank"], int)
    assert kept["a"]["teacher"]["positive"] != 0.61
