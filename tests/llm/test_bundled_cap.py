"""The bundled model's requests: answers held to what a record needs, not the room a real model gets."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from curate.generate.examples import example_task
from curate.llm.client import Answer
from curate.llm.embedded import BUNDLED_ALIAS, BUNDLED_MAX_CHARS, answer_token_cap
from curate.llm.taskspec import load_spec


class Recorder:
    """A backend that keeps the schema and parameters of each request and answers nothing."""

    def __init__(self, model: str):
        self.cfg = SimpleNamespace(model=model)
        self.sent: list[tuple[dict, dict]] = []

    async def ask_json(self, messages, schema, params, seed, name="answer", fresh=False):
        self.sent.append((schema, params))
        return Answer(reason="not asked")


def _strings(schema) -> list[int]:
    if isinstance(schema, dict):
        own = [schema["maxLength"]] if schema.get("type") == "string" and "maxLength" in schema else []
        return own + [n for v in schema.values() for n in _strings(v)]
    if isinstance(schema, list):
        return [n for v in schema for n in _strings(v)]
    return []


def _ask(model: str, family: str = "short-long") -> tuple[dict, dict]:
    backend = Recorder(model)
    spec = load_spec(family)
    variables = {**spec.generate.variables(1), "task": "Find passages about glaciers.",
                 "n_negatives": spec.n_negatives, "positive": "Glaciers form where snow outlasts summer."}
    asyncio.run(example_task(spec).run(backend, variables, seed=1))
    return backend.sent[0]


def test_a_triplet_for_the_bundled_model_is_capped_at_a_few_hundred_tokens():
    """short-long allows 3,500 characters a passage and 3,000 tokens for real models; the bundled
    model gets strings of at most BUNDLED_MAX_CHARS and max_tokens from that schema."""
    schema, params = _ask(BUNDLED_ALIAS)
    assert max(_strings(schema)) <= BUNDLED_MAX_CHARS
    cap = answer_token_cap(schema)
    assert params["max_tokens"] == cap
    assert 300 < cap < 1000, cap  # query, positive, 4 negatives with their scores: hundreds, not thousands
    # the longest answer that schema allows fits under the cap (3 characters a token)
    longest = 2 + sum(len(k) + 4 for k in schema["properties"]) + sum(_strings(schema)) + 4 * 40
    assert longest / 3 < cap


def test_a_query_only_answer_gets_a_cap_of_its_own():
    schema, params = _ask(BUNDLED_ALIAS, "from-corpus")
    assert params["max_tokens"] == answer_token_cap(schema) < 150


def test_other_models_get_the_spec_as_written():
    spec = load_spec("short-long")
    schema, params = _ask("my-model")
    assert schema == spec.generate.schema and params["max_tokens"] == spec.generate.params["max_tokens"] == 3000


def _estimate(model: str, items: int = 3):
    """generate's estimate of ``items`` short-long items asked of ``model`` on one server."""
    from curate.generate.examples import Asking, Item
    from curate.generate.queue import plan_queue
    from curate.core.records import Task

    spec = load_spec("short-long")
    client = SimpleNamespace(cfg=SimpleNamespace(model=model, base_urls=["http://127.0.0.1:1/v1"], concurrency=1,
                                                 batch=None))
    queue = [(0, Item(f"i{n}", Task("t0", "short-long", "Find passages about glaciers."), 0, n)) for n in range(items)]
    return plan_queue(queue, [spec], Asking(), client, None)


def test_the_estimate_counts_the_tokens_the_bundled_model_may_really_answer():
    """The estimate line bounds completion tokens by the max_tokens each request is sent: for the
    bundled model the cap, not the spec's 3,000."""
    schema, params = _ask(BUNDLED_ALIAS)
    assert _estimate(BUNDLED_ALIAS).completion_tokens_max == 3 * params["max_tokens"] < 3000
    assert _estimate("my-model").completion_tokens_max == 3 * 3000
