"""Readers that load an export the way its trainer does, for trainers that do not install here.

Each one follows the consumer's own dataset code (the file, the version read and the lines
mirrored are named in each docstring), quirks included, and raises where the trainer would
fail. The tests then assert what the trainer would really see: texts, negatives a row, ids,
scores and where the instruction goes.
"""

from __future__ import annotations

import json
import math
import os
import random
from pathlib import Path


def _json_rows(path: Path) -> list[dict]:
    """``datasets.load_dataset("json", data_files=path, split="train")``: the loader Tevatron and
    FlagEmbedding use. Arrow gives every row the union of the file's keys (missing ones None)."""
    from datasets import load_dataset

    return load_dataset("json", data_files=str(path), split="train").to_list()


# --------------------------------------------------------------------------- Tevatron
def tevatron_group(row: dict, group_size: int = 8, query_prefix: str = "", passage_prefix: str = "",
                   distil: bool = False, seed: int = 42) -> tuple[str, list[str], list[float] | None]:
    """One training group as texttron/tevatron's ``retriever/dataset.py`` ``TrainDataset`` (and
    ``DistilTrainDataset`` with ``distil``) builds it, commit dd063104: the query with its
    prefix; the positive, then ``group_size - 1`` negatives (drawn with replacement when fewer,
    an IndexError when none); a passage is ``title + " " + text`` when it has a title key
    (a None title fails there), ``text`` otherwise. Distillation needs each passage's ``score``."""
    def text(p: dict) -> str:
        if "title" in p:  # a title that is None (missing on some passages of the file) raises there too
            return passage_prefix + p["title"] + " " + p["text"]
        return passage_prefix + p["text"]

    rng = random.Random(seed)
    pos = row["positive_passages"][rng.randrange(len(row["positive_passages"]))]
    negs = row["negative_passages"]
    k = group_size - 1
    if len(negs) < k:
        picked = [negs[rng.randrange(len(negs))] for _ in range(k)]  # IndexError on an empty list
    else:
        picked = rng.sample(negs, k)
    passages = [pos] + picked
    scores = None
    if distil:
        missing = [p for p in passages if p.get("score") is None]
        if missing:
            raise ValueError(f"{len(missing)} passage(s) without a score: Tevatron's distillation cannot train")
        scores = [float(p["score"]) for p in passages]
    return query_prefix + row["query"], [text(p) for p in passages], scores


def tevatron_rows(path: Path) -> list[dict]:
    return _json_rows(path)


# --------------------------------------------------------------------------- NeMo 2.x
def nemo_custom_retrieval(data_root: Path, val_root: Path | None = None, query_key: str = "question",
                          num_hard_negatives: int = 4) -> dict[str, list[dict]]:
    """NVIDIA/NeMo ``collections/llm/gpt/data/retrieval.py`` ``CustomRetrievalDataModule``
    (commit 8cfedd72): each file is read with ``json.load`` and must be a list of objects; it
    rewrites them as ``{"query", "pos_doc", "neg_doc"}`` lines (first positive only; its test of
    ``pos_doc``'s type for ``neg_doc`` mirrored), which ``bert/data/core.py``
    ``BertEmbeddingDataset`` reads: "query: " / "passage: " added, the first
    ``num_hard_negatives`` negatives, padded by random draws when fewer."""
    out = {}
    for split, path in (("training", data_root), ("validation", val_root)):
        if path is None:
            continue
        with open(path, encoding="utf-8") as f:
            data = json.load(f)  # JSON lines with two or more lines fail here ("Extra data")
        if not isinstance(data, list):
            raise TypeError(f"{path}: Dataset.from_list needs a list of objects")
        lines = []
        for o in data:
            pos = o["pos_doc"][0] if isinstance(o["pos_doc"], list) else o["pos_doc"]
            neg = o["neg_doc"] if isinstance(o["pos_doc"], list) else [o["neg_doc"]]
            lines.append(json.loads(json.dumps({"query": o[query_key], "pos_doc": pos, "neg_doc": neg})))
        rng = random.Random(0)
        examples = []
        for ex in lines:
            negs = list(ex["neg_doc"])
            if len(negs) < num_hard_negatives:
                negs = negs + rng.choices(ex["neg_doc"], k=num_hard_negatives - len(negs))  # IndexError if none
            negs = negs[:num_hard_negatives]
            examples.append({"query": "query: " + ex["query"].strip(), "pos_doc": "passage: " + ex["pos_doc"].strip(),
                             "neg_doc": ["passage: " + n.strip() for n in negs]})  # a nested list fails .strip()
        out[split] = examples
    return out


# --------------------------------------------------------------------------- NeMo Automodel
def automodel_inline(path: Path, n_passages: int = 5) -> list[dict]:
    """NVIDIA-NeMo/Automodel ``components/datasets/llm/retrieval_dataset_inline.py`` (commit
    36044ad3): a file ending ``.jsonl`` goes to this reader; it tries ``json.load``, then one
    object a line; ``query`` (else ``question``) and the keys ``pos_doc`` and ``neg_doc`` are
    required; each may be a string or a list. The group is the first positive and
    ``n_passages - 1`` negatives cycled in order (a ValueError when there is none)."""
    if Path(path).suffix not in (".jsonl", ".tsv", ".csv"):
        raise ValueError(f"{path}: Automodel sends this suffix to its corpus-id loader, not the inline one")
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError:
            f.seek(0)
            data = [json.loads(line) for line in (x.strip() for x in f) if line]
    records = [data] if isinstance(data, dict) else data
    as_list = lambda v: [] if v is None else (v if isinstance(v, list) else [v])  # noqa: E731
    out = []
    for i, it in enumerate(records):
        question = it.get("query", it.get("question"))
        if question is None or "pos_doc" not in it or "neg_doc" not in it:
            raise ValueError(f"{path}: record {i} lacks query/question, pos_doc or neg_doc")
        pos, neg = as_list(it["pos_doc"]), as_list(it["neg_doc"])
        k = n_passages - 1
        if k > 0 and not neg:
            raise ValueError(f"{path}: record {i} has no negative")
        out.append({"question_id": it.get("question_id", it.get("id", f"{os.path.basename(path)}:{i}")),
                    "question": question, "doc_text": [pos[0]] + [neg[j % len(neg)] for j in range(k)]})
    return out


# --------------------------------------------------------------------------- FlagEmbedding
def flagembedding_train_data(paths: list[Path], knowledge_distillation: bool = False,
                             query_instruction_for_retrieval: str | None = "",
                             temperature: float = 0.02) -> list[dict]:
    """FlagOpen/FlagEmbedding ``abc/finetune/embedder/AbsDataset.py`` (commit 7ed43d67): each
    ``--train_data`` entry is a ``.json``/``.jsonl`` file or a folder whose such files are read
    (not its sub-folders); each file is one dataset, flagged ``no_in_batch_neg`` by its stem (a
    file) or its folder's name (a folder). Rows need list ``pos`` and ``neg``; the query becomes
    ``prompt + query`` when an instruction is set; with knowledge distillation every file needs
    ``pos_scores`` and ``neg_scores``, whose softmax (no temperature) is the target the student's
    ``cosine / temperature`` is trained towards. Returns each row with its dataset's flag, the
    query as encoded and, with distillation, the teacher's target distribution."""
    files: list[tuple[Path, bool]] = []
    for entry in map(Path, paths):
        if entry.is_file():
            if entry.suffix in (".json", ".jsonl"):
                files.append((entry, entry.name.split(".")[-2].endswith("no_in_batch_neg")))
        else:
            flag = str(entry).endswith("no_in_batch_neg")
            files += [(entry / n, flag) for n in sorted(os.listdir(entry)) if n.endswith((".json", ".jsonl"))
                      and (entry / n).is_file()]
    if not files:
        raise ValueError("no training file: datasets.concatenate_datasets([]) fails")
    out = []
    for path, flag in files:
        rows = _json_rows(path)
        if knowledge_distillation and not all("pos_scores" in r and "neg_scores" in r for r in rows):
            raise ValueError(f"{path}: knowledge distillation needs pos_scores and neg_scores in every file")
        for r in rows:
            assert isinstance(r["pos"], list) and isinstance(r["neg"], list)
            if not r["neg"]:
                raise ZeroDivisionError(f"{path}: a row with no negative")
            query = r["query"]
            if query_instruction_for_retrieval is not None:
                query = f"{r['prompt'] if 'prompt' in r else query_instruction_for_retrieval}{query}"
            row = {"file": path, "no_in_batch_neg": flag, "query_text": query, "pos": r["pos"], "neg": r["neg"],
                   "type": r.get("type")}
            if knowledge_distillation:
                scores = [float(s) for s in r["pos_scores"][:1] + r["neg_scores"]]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                row["teacher_target"] = [x / sum(e) for x in e]
                row["student_scale"] = 1 / temperature
            out.append(row)
    return out
