"""A teacher kind as a plugin: ``hashwords:DIM``, vectors of hashed words, no model to load.

``--teacher hashwords:256`` (mine, filter, eval, ...) uses it once this package is installed:
its entry point in the ``curate.teachers`` group, named after the prefix before ``:``, names
this module. The teacher around it adds the embedding cache, the normalisation and the prompts;
a kind only turns texts into rows. Lexical and crude, but instant: for trying a pipeline out.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from curate.core.errors import CurateError
from curate.embed.teacher import TEACHERS, TeacherModel


@TEACHERS.register("hashwords")
class HashedWords(TeacherModel):
    local = True  # cheap to build: a sharding executor may build one in every worker

    def __init__(self, name, options):
        size = name.partition(":")[2] or "256"
        if not size.isdigit() or int(size) < 8:
            raise CurateError(f"--teacher {name}: give hashwords:DIM, DIM a whole number of at least 8")
        super().__init__(f"hashwords:{int(size)}", options)  # the name is also its cache key
        self.dim = int(size)

    def encode(self, texts, prompt):
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", (prompt + text).lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                rows[row, h % self.dim] += 1.0 if h >> 63 else -1.0  # a signed count, so collisions cancel out
        return rows
