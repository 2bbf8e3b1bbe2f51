"""Extending curate, each in one module (README: "Extend curate"): a filter step, an export
format, a mining preset and an LLM backend, each registered here and used through the
stages' Python API exactly as the shipped ones are."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from curate import api
from curate.core.errors import CurateError
from curate.core.records import Negative, Record
from tests.helpers import SHARED_DATA, read_jsonl, scifact_pairs
from tests.mine_helpers import HashTeacher

SCIFACT = SHARED_DATA / "scifact"


def _records(path: Path, n: int = 6) -> Path:
    pairs = scifact_pairs(n, max_chars=600)
    recs = [Record(id=f"r{i}", task_type="short-long", task="Given a claim, find evidence.", query=q, positive=d,
                   negatives=[Negative(text=pairs[(i + j) % n][1], level=j) for j in (1, 2)])
            for i, (q, d) in enumerate(pairs)]
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- a filter step


@dataclass
class ShortQueryParams:
    min_words: int = field(default=5, metadata={"min": 1})


def test_a_filter_step_is_one_registered_function(tmp_path):
    from curate.filter.base import STEPS, register

    @register("short_query", ShortQueryParams)
    def short_query(records, params, ctx):
        p = ShortQueryParams(**params)
        kept = []
        for rec in records:
            if len(rec.query.split()) < p.min_words:
                ctx.reject(rec, "short-query", {"words": len(rec.query.split())})
            else:
                kept.append(rec)
        return kept

    try:
        recs = _records(tmp_path / "in.jsonl")
        words = sorted(len(r["query"].split()) for r in read_jsonl(recs))
        limit = words[len(words) // 2]  # about half the claims are shorter
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text(f"steps:\n  - short_query: {{min_words: {limit}}}\n")
        report = api.filter(api.FilterOptions(inp=str(recs), out=str(tmp_path / "f"), recipe=str(recipe)))
        kept = read_jsonl(tmp_path / "f" / "filtered.jsonl")
        assert kept and all(len(r["query"].split()) >= limit for r in kept)
        dropped = read_jsonl(tmp_path / "f" / "rejected.jsonl")
        assert {d["reason"] for d in dropped} == {"short-query"} and len(kept) + len(dropped) == 6
        assert report["steps"][0]["records_dropped"] == {"short-query": len(dropped)}
        # its parameters are checked like a shipped step's, when the recipe loads
        recipe.write_text("steps:\n  - short_query: {min_word: 3}\n")
        with pytest.raises(CurateError, match="unknown parameter 'min_word' \\(did you mean min_words\\?\\)"):
            api.filter(api.FilterOptions(inp=str(recs), out=str(tmp_path / "g"), recipe=str(recipe)))
    finally:
        STEPS.unregister("short_query")


# --------------------------------------------------------------------------- an export format


def test_an_export_format_is_one_registered_writer(tmp_path):
    from curate.export.formats import FORMATS, register_format

    @register_format("tsv-triplets")
    def write_tsv(rows, out_dir, card):
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "triplets.tsv"
        with open(path, "w", encoding="utf-8", newline="") as fh:
            w = csv.writer(fh, delimiter="\t")
            for row in rows:
                for neg in row.negatives:
                    w.writerow([row.query_text, row.positive, neg])
        return [path]

    try:
        recs = _records(tmp_path / "in.jsonl")
        report = api.export(api.ExportOptions(inputs=(str(recs),), out=str(tmp_path / "e"), formats=("tsv-triplets",),
                                              batch_size=2, negatives_per_row=None))  # both negatives a row
        lines = list(csv.reader(open(tmp_path / "e" / "triplets.tsv", encoding="utf-8"), delimiter="\t"))
        assert len(lines) == sum(2 for _ in read_jsonl(recs)) and all(len(x) == 3 for x in lines)
        assert report["outputs"] == {"tsv-triplets": ["triplets.tsv"]}
    finally:
        FORMATS.unregister("tsv-triplets")


# --------------------------------------------------------------------------- a mining preset


PRESET_MODULE = '''
from curate.negatives.presets import preset
from curate.negatives.select import Thresholds


@preset("middle-band", {"rank_min": 3, "rank_max": 8})
def middle_band(knobs):
    """Candidates ranked 3..8, and none scoring above 0.9."""
    return Thresholds(rank_min=knobs["rank_min"], rank_max=knobs["rank_max"], max_score=0.9)
'''


def test_a_mining_preset_is_one_module(tmp_path):
    from curate.mine.main import MineOptions, run_mine
    from curate.negatives.presets import PRESETS

    module = tmp_path / "my_presets.py"
    module.write_text(PRESET_MODULE)
    try:
        opts = MineOptions(out=str(tmp_path / "m"), data=str(SCIFACT), split="train", limit=20, method="middle-band",
                           preset_modules=(str(module),), k=3, plots=False)
        report = run_mine(opts, teachers=[HashTeacher(dim=32)])
        assert report["method"] == {"name": "middle-band", "rank_min": 3, "rank_max": 8}
        rows = read_jsonl(tmp_path / "m" / "mined.jsonl")
        assert len(rows) == 20
        for r in rows:
            # ranks count the query's positives too; the band counts candidates only
            ranks, n_pos = [n["mine_rank"] for n in r["negatives"]], 1 + len(r["positives"])
            assert len(ranks) == 3 and all(3 <= k <= 8 + n_pos for k in ranks) and ranks == sorted(ranks)
            assert all(n["teacher_score"] <= 0.9 for n in r["negatives"])
        # a knob the preset does not take is refused, naming the presets that do
        with pytest.raises(CurateError, match="--max-score applies to abs, not middle-band"):
            run_mine(MineOptions(**{**opts.__dict__, "max_score": 0.5}), teachers=[HashTeacher(dim=32)])
    finally:
        PRESETS.unregister("middle-band")


def test_a_preset_module_that_fails_is_one_line(tmp_path):
    from curate.negatives.presets import load_preset_module

    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('nope')\n")
    with pytest.raises(CurateError, match=f"^{bad}: cannot import: RuntimeError: nope$"):
        load_preset_module(bad)


# --------------------------------------------------------------------------- an LLM backend


class CannedBackend:
    """Answers every ask with the first allowed value of each field: a backend without a server."""

    def __init__(self, cfg, cache):
        self.model = cfg.model
        self.requests_sent = 0
        self.closed = False

    async def ask_json(self, messages, schema, params, seed, name="answer", fresh=False):
        from curate.llm.client import Answer

        self.requests_sent += 1
        data = {k: (v.get("enum") or ["fine"])[0] for k, v in schema.get("properties", {}).items()}
        return Answer(data=data, raw=json.dumps(data), attempts=1)

    async def close(self):
        self.closed = True


def test_an_llm_backend_is_one_registered_class(tmp_path):
    from curate.llm.backend import BACKENDS, register_backend

    register_backend("canned")(CannedBackend)
    try:
        recs = _records(tmp_path / "in.jsonl")
        recipe = tmp_path / "judge.yaml"
        recipe.write_text("steps:\n  - judge_answerable: {families: [short-long]}\n")
        llm = api.LLMOptions(base_urls=("canned://local",), model="canned")
        report = api.filter(api.FilterOptions(inp=str(recs), out=str(tmp_path / "f"), recipe=str(recipe), llm=llm))
        # the canned backend says "yes" (the schema's first verdict) to everything: each positive
        # answers its query (kept) and so does each negative (dropped), so no record keeps a negative
        assert report["records_in"] == 6 and report["records_kept"] == 0
        assert report["steps"][0]["negatives_dropped"] == {"negative-answers": 12}
        assert report["steps"][0]["records_dropped"] == {"no-negatives-left": 6}
        with pytest.raises(CurateError, match="no backend for nothing://"):
            api.filter(api.FilterOptions(inp=str(recs), out=str(tmp_path / "g"), recipe=str(recipe),
                                         llm=api.LLMOptions(base_urls=("nothing://x",), model="m")))
    finally:
        BACKENDS.unregister("canned")


# --------------------------------------------------------------------------- an LLM task


def test_an_llm_task_is_a_template_a_schema_and_a_parse(tmp_path):
    import asyncio

    from curate.filter.steps.judges import Verdict, verdict_task
    from curate.generate.examples import Example, example_task
    from curate.llm.task import LLMTask
    from curate.llm.taskspec import load_spec

    (tmp_path / "title.j2").write_text("Give a title for: {{ passage }}\n")
    schema = {"type": "object", "properties": {"title": {"type": "string", "maxLength": 40}},
              "required": ["title"]}

    def parse(data):
        if data["title"] == "fine":
            raise ValueError("a placeholder title")
        return data["title"].upper()

    task = LLMTask("title", "title.j2", schema, parse, params={"temperature": 0.3}, system="Be brief.",
                   prompt_dirs=(str(tmp_path),))
    backend = CannedBackend(type("Cfg", (), {"model": "m"}), None)
    seen = []

    async def record_and_answer(messages, schema_, params, seed, name="answer", fresh=False):
        seen.append((messages, params, seed, name))
        from curate.llm.client import Answer
        return Answer(data={"title": "cells in mice" if seed == 1 else "fine"}, attempts=1)

    backend.ask_json = record_and_answer
    good = asyncio.run(task.run(backend, {"passage": "Mouse cells divide."}, seed=1))
    assert good.ok and good.value == "CELLS IN MICE"
    assert seen[0] == ([{"role": "system", "content": "Be brief."},
                        {"role": "user", "content": "Give a title for: Mouse cells divide."}],
                       {"temperature": 0.3}, 1, "title")
    assert good.prompt.provenance()["template"] == "title.j2" and len(good.prompt.template_hash) == 12
    # a valid answer that parse rejects is a failed result with the parser's reason, never a crash
    bad = asyncio.run(task.run(backend, {"passage": "x"}, seed=2, params={"temperature": 0.0}))
    assert not bad.ok and bad.value is None and bad.reason == "parse: a placeholder title"
    assert seen[1][1] == {"temperature": 0.0}
    # a template that does not exist stops before any request
    with pytest.raises(CurateError, match="template 'nope.j2' not found"):
        LLMTask("t", "nope.j2", schema, parse).check()

    # the shipped calls are tasks of the same type: generate's example and a judge's verdict
    spec = load_spec("short-long")
    example = example_task(spec, max_chars=100)
    assert example.name == "example" and example.template == spec.generate.template
    assert example.schema["properties"]["query"]["maxLength"] <= 100
    answer = {"query": " q ", "positive": "p", "negatives": [{"text": f" n{i} "} for i in range(6)]}
    parsed = example.parse(answer)
    assert isinstance(parsed, Example) and parsed.query == "q"
    assert [(n.text, n.level) for n in parsed.negatives] == [(f"n{i}", i + 1) for i in range(spec.n_negatives)]
    verdict = verdict_task("judge/refute.j2", ["support", "refute"], ())
    assert verdict.parse({"verdict": "refute", "reason": "r"}) == Verdict("refute", "r")
    assert verdict.schema["properties"]["verdict"]["enum"] == ["support", "refute"]
