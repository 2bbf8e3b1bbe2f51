"""An LLM backend as a plugin: ``echo://``, answers written by a fixed function, no server.

``--base-url echo://anything --model echo`` sends every LLM task of a run (brainstorm, generate,
the judges) here once this package is installed: its entry point in the ``curate.backends``
group, named after the URL scheme, names this module. Each answer fills the task's JSON schema
with words of the prompt, the same for the same prompt and seed: a way to run a whole pipeline,
or a test, with no model at all. A real backend (another API, a model in this process) has the
same members.
"""

from __future__ import annotations

import json
import random

from curate.llm.backend import register_backend
from curate.llm.client import Answer


@register_backend("echo")
class EchoBackend:
    def __init__(self, cfg, cache):
        self.cfg = cfg  # the run's ClientConfig: base_urls, model, concurrency, ...; cache: its request cache
        self.requests_sent = 0

    async def ask_json(self, messages, schema, params, seed, name="answer", fresh=False):
        """One answer that follows ``schema``, from the last message's words and ``seed``."""
        self.requests_sent += 1
        words = messages[-1]["content"].split()
        data = fill(schema, random.Random(f"{seed}:{name}"), words, "")
        return Answer(data=data, raw=json.dumps(data), attempts=1)

    async def close(self):
        pass


def fill(schema: dict, rng: random.Random, words: list[str], path: str):
    """A value of ``schema``: enums take their first choice, numbers their minimum, booleans false,
    arrays their fewest items, strings their ``path`` and a run of the prompt's words, within the
    allowed length."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {key: fill(sub, rng, words, f"{path}.{key}" if path else key)
                for key, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [fill(schema.get("items", {}), rng, words, f"{path}[{i + 1}]")
                for i in range(max(1, schema.get("minItems", 1)))]
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    start = rng.randrange(max(1, len(words)))
    text = (f"{path}: " + " ".join(words[start:start + 12])).ljust(schema.get("minLength", 0), ".")
    return text[:schema.get("maxLength", len(text))]
