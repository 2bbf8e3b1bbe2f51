"""Helpers for the mining tests: a fast deterministic teacher and small real-data subsets."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


class HashTeacher:
    """A stand-in teacher: each text gets a fixed random unit vector (no model, instant).

    ``overrides`` pins chosen texts to chosen vectors, so a test can set exact scores.
    """

    def __init__(self, model_id: str = "hash-teacher", dim: int = 16, overrides: dict | None = None):
        self.model_id = model_id
        self.dim = dim
        self.overrides = overrides or {}
        self.encoded = 0
        self.cache_hits = 0

    def _vec(self, text: str) -> np.ndarray:
        if text in self.overrides:
            v = np.asarray(self.overrides[text], dtype=np.float32)
            return v / np.linalg.norm(v)
        seed = int.from_bytes(hashlib.sha256(f"{self.model_id}\x00{text}".encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)

    def encode(self, texts) -> np.ndarray:
        texts = list(texts)
        self.encoded += len(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self._vec(t) for t in texts])

    encode_queries = encode
    encode_docs = encode


def write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def write_beir(folder: Path, corpus: dict[str, str], queries: dict[str, str],
               qrels: dict[str, dict[str, int]], split: str = "train") -> Path:
    """A small BEIR folder (corpus texts are written as text only, so doc_text is unchanged)."""
    write_jsonl(folder / "corpus.jsonl", ({"_id": d, "text": t} for d, t in corpus.items()))
    write_jsonl(folder / "queries.jsonl", ({"_id": q, "text": t} for q, t in queries.items()))
    write_qrels(folder / "qrels" / f"{split}.tsv", qrels)
    return folder


def write_qrels(path: Path, qrels: dict[str, dict[str, int]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{q}\t{d}\t{s}" for q, rel in qrels.items() for d, s in rel.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def memo_model(model):
    """Make ``model.encode`` remember every text it embedded (keyed by text, prompt must be empty).

    Both miners then see bit-identical vectors for a text, and the second one encodes
    nothing: the comparison tests the mining, not BLAS batch-to-batch noise, in half the time.
    """
    base = type(model)
    memo: dict[str, np.ndarray] = {}

    def encode(self, inputs=None, prompt_name=None, prompt=None, **kw):
        assert not prompt and not self.prompts.get(prompt_name or "", ""), "memo assumes no prompts"
        single = isinstance(inputs, str)
        texts = [inputs] if single else list(inputs)
        todo = [t for t in dict.fromkeys(texts) if t not in memo]
        if todo:
            kw = {k: v for k, v in kw.items() if k not in ("pool", "task")}
            kw.update(normalize_embeddings=True, convert_to_numpy=True, convert_to_tensor=False,
                      show_progress_bar=False)
            memo.update(zip(todo, np.asarray(base.encode(self, todo, **kw), dtype=np.float32)))
        out = np.stack([memo[t] for t in texts])
        return out[0] if single else out

    model.__class__ = type(f"Memo{base.__name__}", (base,), {"encode": encode})
    return memo


def scifact_slice(folder: Path, queries_a_split: int, extra_docs: int = 60, max_chars: int = 600) -> Path | None:
    """A small real BEIR folder: the first ``queries_a_split`` SciFact claims of the train and of
    the test qrels, their evidence and ``extra_docs`` more abstracts (cut to ``max_chars``); None
    when no SciFact copy is at hand."""
    from tests.helpers import SHARED_DATA, read_jsonl

    src = SHARED_DATA / "scifact"
    if not (src / "corpus.jsonl").exists():  # pragma: no cover
        return None
    qrels: dict[str, dict[str, dict[str, int]]] = {}
    for split in ("train", "test"):
        qrels[split] = {}
        for line in (src / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]:
            q, d, _ = line.split("\t")
            if len(qrels[split]) < queries_a_split or q in qrels[split]:
                qrels[split].setdefault(q, {})[d] = 1
    wanted = {d for s in qrels.values() for rel in s.values() for d in rel}
    corpus = {}
    for doc in read_jsonl(src / "corpus.jsonl"):
        if doc["_id"] in wanted or len(corpus) < extra_docs:
            corpus[doc["_id"]] = (doc["title"] + " " + doc["text"])[:max_chars]
    asked = {q for s in qrels.values() for q in s}
    queries = {q["_id"]: q["text"] for q in read_jsonl(src / "queries.jsonl") if q["_id"] in asked}
    write_beir(folder, corpus, queries, qrels["train"], "train")
    return write_beir(folder, corpus, queries, qrels["test"], "test")
