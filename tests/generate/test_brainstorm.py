"""Brainstorm logic: keeps asking until enough distinct tasks, drops near-duplicates, stops when stuck."""

from __future__ import annotations

import asyncio

from curate.llm.client import Answer
from curate.core.progress import RunStats
from curate.llm.taskspec import load_spec
from curate.generate.brainstorm import brainstorm
from tests.helpers import read_jsonl


class ScriptedClient:
    """Stands in for LLMClient: answers brainstorm call k with scripted task lists."""

    class cfg:
        model = "scripted"

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    async def ask_json(self, messages, schema, params, seed, name="answer", fresh=False):
        k = len(self.calls)
        self.calls.append({"seed": seed, "temperature": params["temperature"], "prompt": messages[-1]["content"]})
        tasks = self.answers[k] if k < len(self.answers) else self.answers[-1]
        return Answer(data={"tasks": tasks}, attempts=1)


DISTINCT = [
    "Given a patient's symptom question, retrieve medical articles that answer it.",
    "Given a legal term, find court rulings that interpret it.",
    "Given a recipe name, retrieve cooking blog posts describing how to make it.",
    "Given a bug report title, find forum threads with working fixes.",
    "Given a company name, retrieve news stories about its quarterly results.",
]


def test_keeps_calling_until_enough_distinct_tasks(tmp_path):
    spec = load_spec("short-long")
    client = ScriptedClient([
        DISTINCT[:2],
        [DISTINCT[0] + "!", "given a legal term find court rulings that interpret it", DISTINCT[2]],  # 2 near-dups
        [DISTINCT[3], DISTINCT[1]],
        [DISTINCT[4], "Given a bird's song, find recordings of the same species."],
    ])
    tasks = asyncio.run(brainstorm(spec, 5, client, tmp_path / "tasks.jsonl", seed=7, stats=RunStats("brainstorm")))
    assert [t.task for t in tasks] == DISTINCT
    assert len(client.calls) >= 4
    # calls differ in seed, and the temperature follows the spec's schedule
    assert len({c["seed"] for c in client.calls}) == len(client.calls)
    temps = [c["temperature"] for c in client.calls]
    assert temps[:3] == spec.brainstorm_temperatures[:3]
    saved = read_jsonl(tmp_path / "tasks.jsonl")
    assert [t["task"] for t in saved] == DISTINCT
    assert all(t["task_type"] == "short-long" and t["meta"]["model"] == "scripted" for t in saved)


def test_gives_up_when_the_model_repeats_itself(tmp_path):
    spec = load_spec("short-long")
    client = ScriptedClient([DISTINCT[:1]])  # the same single task on every call
    tasks = asyncio.run(brainstorm(spec, 50, client, tmp_path / "tasks.jsonl", seed=1, stats=RunStats("brainstorm")))
    assert [t.task for t in tasks] == DISTINCT[:1]
    assert len(client.calls) < 40, "bounded: stops after several calls that add nothing"


def test_existing_task_file_is_reused_and_extended(tmp_path):
    spec = load_spec("short-long")
    asyncio.run(brainstorm(spec, 2, ScriptedClient([DISTINCT[:2]]), tmp_path / "tasks.jsonl", seed=1, stats=RunStats("b")))
    client = ScriptedClient([DISTINCT[:2], DISTINCT[2:4]])
    tasks = asyncio.run(brainstorm(spec, 4, client, tmp_path / "tasks.jsonl", seed=1, stats=RunStats("b")))
    assert [t.task for t in tasks] == DISTINCT[:4]
    assert len(read_jsonl(tmp_path / "tasks.jsonl")) == 4, "nothing written twice"


def test_a_client_opened_for_vllms_offline_runner_brainstorms_only_what_it_has(tmp_path):
    """Brainstorming asks in waves, which vLLM's offline runner cannot answer: a client opened
    with that plan refuses in one line when tasks are missing, and gives back those it has."""
    import pytest

    from curate.core.errors import CurateError

    class OfflineClient(ScriptedClient):
        class cfg:
            model = "scripted"

            class batch:
                mode = "vllm"

    spec = load_spec("short-long")
    asyncio.run(brainstorm(spec, 2, ScriptedClient([DISTINCT[:2]]), tmp_path / "tasks.jsonl", seed=1,
                           stats=RunStats("b")))
    offline = OfflineClient([DISTINCT[2:4]])
    tasks = asyncio.run(brainstorm(spec, 2, offline, tmp_path / "tasks.jsonl", seed=1, stats=RunStats("b")))
    assert [t.task for t in tasks] == DISTINCT[:2] and offline.calls == []
    with pytest.raises(CurateError, match="--batch vllm: brainstorming short-long's tasks asks a server"):
        asyncio.run(brainstorm(spec, 4, offline, tmp_path / "tasks.jsonl", seed=1, stats=RunStats("b")))
    assert offline.calls == []
