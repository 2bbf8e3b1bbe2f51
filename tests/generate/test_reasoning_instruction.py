"""The reasoning and instruction-negatives specs, and the spec keys they rest on:
``optional_inputs`` (one spec runs alone, the model writing the positive, and with
``--from-corpus``, the passage given) and ``query_parts`` (the instruction joined to the query).

Fast tests run the CLI against the scripted fake server (tests/fake_llm_server.py); the e2e tests
run the bundled model (SmolLM2-135M on the embedded llama.cpp server) on one item a family.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from curate.core.errors import CurateError
from curate.core.records import Record
from curate.datasets.corpus import read_corpus
from curate.generate.examples import joined_query
from curate.generate.from_corpus import check_spec
from curate.llm.taskspec import load_spec
from tests.fake_llm_server import fake_llm_server
from tests.generate.test_from_corpus import _docs, _generate as _generate_corpus
from tests.generate.test_from_pairs import _env
from tests.helpers import SHARED_DATA, assert_one_line_error, read_jsonl, run_curate

FAMILIES = ("reasoning", "instruction-negatives")
# The bundled model's runs: one item a family, strings of up to 150 characters. Each answer is a
# query, a positive and four negatives written token by token on 2 cores, so these two numbers
# set most of this module's time; one valid record a family is what the e2e check needs.
BUNDLED_ITEMS, BUNDLED_CHARS = 1, 150
OFFLINE = "http://127.0.0.1:9/v1"


def _spec_yaml(tmp_path: Path, extra: str, required: str = "[query, positive, negatives]",
               template: str = "generate/short-long.j2") -> Path:
    folder = tmp_path / "specs"
    folder.mkdir(exist_ok=True)
    path = folder / "mine.yaml"
    path.write_text(f"""family: mine
fixed_tasks: [Find it.]
{extra}
generate:
  template: {template}
  schema:
    type: object
    properties:
      query: {{type: string, maxLength: 50}}
      positive: {{type: string, maxLength: 50}}
      negatives: {{type: array, minItems: 4, maxItems: 4, items: {{type: object, properties: {{text: {{type: string, maxLength: 50}}}}, required: [text]}}}}
    required: {required}
""", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- spec keys


@pytest.mark.parametrize("family", FAMILIES)
def test_one_spec_both_ways(family):
    spec = load_spec(family)
    assert spec.inputs == [] and spec.optional_inputs == ["positive"]
    alone = spec.generate.schema
    assert "positive" in alone["properties"] and "positive" in alone["required"], "alone, the model writes it"
    corpus = spec.taking(["positive", "positive_id", "language"])  # what a corpus item brings
    assert corpus.inputs == ["positive"] and corpus.optional_inputs == []
    assert "positive" not in corpus.generate.schema["properties"]
    assert "positive" not in corpus.generate.schema["required"]
    assert {"query", "negatives"} <= set(corpus.generate.schema["required"])
    assert spec.generate.schema == alone, "the spec itself is left as it was"
    assert spec.taking([]) is spec and corpus.taking(["positive"]) is corpus
    check_spec(spec)  # --from-corpus takes it


def test_a_spec_without_the_key_is_refused_with_a_corpus_as_before():
    spec = load_spec("short-long")
    assert spec.optional_inputs == []
    with pytest.raises(CurateError, match="short-long: the spec asks the model for positive"):
        spec.taking(["positive"])
    with pytest.raises(CurateError, match="--from-corpus needs a spec whose 'inputs'"):
        check_spec(spec)
    assert load_spec("from-corpus").taking(["positive"]).inputs == ["positive"]  # inputs: itself


@pytest.mark.parametrize("extra, needle", [
    ("optional_inputs: [negatives]", "'optional_inputs' may list only query, positive, not negatives"),
    ("optional_inputs: positive", "'optional_inputs' must be a list"),
    ("inputs: [positive]\noptional_inputs: [positive]", "positive is under both 'inputs' and 'optional_inputs'"),
    ("query_parts: [instruction, query]", "'query_parts' lists query first"),
    ("query_parts: [query]", "'query_parts' lists query first"),
    ("query_parts: [query, positive]", "'query_parts': positive must be a string the schema requires"),
    ("query_parts: [query, note]", "'query_parts': note must be a string the schema requires"),
])
def test_bad_spec_keys_are_one_line(tmp_path, extra, needle):
    path = _spec_yaml(tmp_path, extra)
    with pytest.raises(CurateError, match="mine.yaml: ") as e:
        load_spec(str(path))
    assert needle in str(e.value)


def test_an_optional_input_the_schema_does_not_require_is_refused(tmp_path):
    path = _spec_yaml(tmp_path, "inputs: [query]\noptional_inputs: [positive]", required="[query, negatives]")
    with pytest.raises(CurateError, match="generate.schema must require positive"):
        load_spec(str(path))


def test_query_parts_join_into_one_query():
    assert joined_query(["heat pump noise", "Only UK sources."]) == "heat pump noise. Only UK sources."
    assert joined_query(["Why is it loud?", "Only  UK\nsources."]) == "Why is it loud? Only UK sources."
    assert joined_query(["a", ""]) == "a"
    spec = load_spec("instruction-negatives")
    assert spec.query_parts == ["query", "instruction"] and "instruction" in spec.generate.schema["required"]


# --------------------------------------------------------------------------- through the CLI (fake server)


def _answers(srv) -> list[dict]:
    return [json.loads(r.content) for r in srv.chat_requests]


def test_alone_the_model_writes_the_positive(tmp_path):
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        proc = run_curate("generate", "--task", "reasoning", "--task", "instruction-negatives", "-n", "2",
                          "--out", str(out), "--base-url", srv.base_url, "--model", "m", "--max-retries", "0",
                          "--max-reasks", "0", "--timeout", "10", env=_env(tmp_path / "home"), timeout=300)
        assert proc.returncode == 0, proc.stderr
        sent = list(srv.chat_requests)
    assert len(sent) == 4, "fixed tasks: no brainstorm request"
    for req in sent:
        schema = req.body["response_format"]["json_schema"]["schema"]
        assert "positive" in schema["required"]
        prompt = req.last_user
        assert "Passage:" not in prompt and "{{" not in prompt
    records = read_jsonl(out / "generated.jsonl")
    assert sorted(r["task_type"] for r in records) == ["instruction-negatives"] * 2 + ["reasoning"] * 2
    for rec in records:
        r = Record.from_dict(rec)
        assert r.task in load_spec(r.task_type).fixed_tasks
        assert r.positive_id is None and [n.level for n in r.negatives] == [1, 2, 3, 4]
        assert r.meta["template"] == f"generate/{r.task_type}.j2"
        if r.task_type == "instruction-negatives":
            parts = r.meta["query_parts"]
            assert set(parts) == {"query", "instruction"}
            assert r.query == joined_query([parts["query"], parts["instruction"]])
        else:
            assert "query_parts" not in r.meta
            assert {"reasoning_type", "query_type", "difficulty"} <= set(r.meta["placeholders"])


@pytest.mark.parametrize("family", FAMILIES)
def test_from_corpus_the_passage_is_the_positive(tmp_path, family):
    docs = _docs(tmp_path / "docs")
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        proc = _generate_corpus(srv.base_url, docs, out, "--task", family, "-n", "3")
        assert proc.returncode == 0, proc.stderr
        sent = list(srv.chat_requests)
        again = _generate_corpus(srv.base_url, docs, out, "--task", family, "-n", "3")
        assert again.returncode == 0 and len(srv.chat_requests) == 3, "a finished run sends nothing"
    corpus = dict(read_corpus(out / "corpus.jsonl"))
    answers = {}
    for req in sent:
        schema = req.body["response_format"]["json_schema"]["schema"]
        assert "positive" not in schema["properties"] and "positive" not in schema["required"]
        assert "negatives" in schema["required"]
        (pid,) = [i for i, text in corpus.items() if f"Passage:\n{text}\n" in req.last_user]
        answers[pid] = json.loads(req.content)
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == 3
    for rec in records:
        r = Record.from_dict(rec)
        assert r.task_type == family and r.positive == corpus[r.positive_id], "the passage verbatim, under its id"
        assert r.meta["passage"]["id"] == r.positive_id and "positive" not in r.meta["placeholders"]
        answer = answers[r.positive_id]
        assert [n.text for n in r.negatives] == [n["text"].strip() for n in answer["negatives"]]
        if family == "instruction-negatives":
            assert r.meta["query_parts"] == {"query": answer["query"].strip(),
                                             "instruction": answer["instruction"].strip()}
            assert r.query == joined_query([answer["query"], answer["instruction"]])
        else:
            assert r.query == answer["query"].strip()


def test_a_spec_can_take_given_pairs_too(tmp_path):
    """optional_inputs: [query, positive]: the spec runs alone and with --from-pairs."""
    path = _spec_yaml(tmp_path, "optional_inputs: [query, positive]", template="generate/from-pairs.j2")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "why tides", "positive": "The Moon pulls the oceans."}) + "\n")
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        proc = run_curate("generate", "--from-pairs", str(pairs), "--task", str(path), "--out", str(out),
                          "--base-url", srv.base_url, "--model", "m", "--max-retries", "0", "--max-reasks", "0",
                          env=_env(tmp_path / "home"), timeout=300)
        assert proc.returncode == 0, proc.stderr
        (req,) = srv.chat_requests
    schema = req.body["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"negatives"}
    (rec,) = read_jsonl(out / "generated.jsonl")
    assert (rec["query"], rec["positive"]) == ("why tides", "The Moon pulls the oceans.")


def test_a_spec_without_the_key_is_refused_before_any_request(tmp_path):
    docs = _docs(tmp_path / "docs")
    proc = run_curate("generate", "--from-corpus", str(docs), "--task", "short-long", "--out", str(tmp_path / "o"),
                      "--base-url", OFFLINE, "--model", "m")
    assert proc.returncode == 2
    assert_one_line_error(proc, "--from-corpus", "short-long")
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- the bundled model


def _answer_of(r: Record, family: str, given_positive: bool) -> dict:
    """The model's answer, rebuilt from the record, for the schema it was asked with."""
    answer = {"query": r.meta["query_parts"]["query"] if family == "instruction-negatives" else r.query,
              "positive_score": r.positive_score,
              "negatives": [{"text": n.text, "score": n.score} for n in r.negatives]}
    if family == "instruction-negatives":
        answer["instruction"] = r.meta["query_parts"]["instruction"]
    if not given_positive:
        answer["positive"] = r.positive
    return answer


def _stripped(schema):
    """The schema as a stored record meets it: texts are kept stripped, and the model's blanks
    around a text counted towards its minLength (the grammar's), so a minLength is checked as 1."""
    if isinstance(schema, dict):
        out = {k: _stripped(v) for k, v in schema.items()}
        if out.get("type") == "string" and "minLength" in out:
            out["minLength"] = 1
        return out
    return [_stripped(v) for v in schema] if isinstance(schema, list) else schema


def check_answer(r: Record, family: str, given_positive: bool, max_chars: int) -> None:
    """The model's answer, rebuilt from the record, fits the schema it was asked with."""
    spec = load_spec(family).taking(["positive"] if given_positive else [])
    jsonschema.validate(_answer_of(r, family, given_positive), _stripped(spec.generate.with_max_chars(max_chars).schema))
    assert all(len(t) <= max_chars for t in (r.query if family == "reasoning" else r.meta["query_parts"]["query"],
                                             *(n.text for n in r.negatives)))


def _check_bundled(out: Path, family: str, corpus: dict | None) -> list[Record]:
    records = [Record.from_dict(d) for d in read_jsonl(out / "generated.jsonl") if d["task_type"] == family]
    failed = [f for f in read_jsonl(out / "failed.jsonl") if f["task_type"] == family]
    assert len(records) + len(failed) == BUNDLED_ITEMS, "every item ends as a record or a failure"
    assert records, f"{family}: the bundled model gave no valid record: {[f['reason'] for f in failed]}"
    for r in records:
        check_answer(r, family, corpus is not None, BUNDLED_CHARS)
        assert [n.level for n in r.negatives] == [1, 2, 3, 4]
        if corpus is not None:
            assert r.positive == corpus[r.positive_id]
        print(f"{family}{' (from corpus)' if corpus is not None else ''}: "
              + json.dumps({"task": r.task, "query": r.query, "positive": r.positive[:300],
                            "negatives": [n.text for n in r.negatives],
                            "query_parts": r.meta.get("query_parts")}, ensure_ascii=False))
    return records


@pytest.fixture(scope="module")
def bundled_alone(tmp_path_factory):
    out = tmp_path_factory.mktemp("reasoning-e2e") / "alone"
    proc = run_curate("generate", "--task", "reasoning", "--task", "instruction-negatives", "-n", str(BUNDLED_ITEMS),
                      "--max-chars", str(BUNDLED_CHARS), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.e2e
@pytest.mark.parametrize("family", FAMILIES)
def test_bundled_model_writes_valid_records(bundled_alone, family):
    _check_bundled(bundled_alone, family, None)


@pytest.mark.bench
@pytest.mark.e2e
@pytest.mark.parametrize("family", FAMILIES)
def test_bundled_model_from_corpus(tmp_path, family):
    out = tmp_path / "out"
    proc = run_curate("generate", "--task", family, "--from-corpus", str(SHARED_DATA / "scifact"),
                      "-n", str(BUNDLED_ITEMS), "--max-chars", str(BUNDLED_CHARS), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    _check_bundled(out, family, dict(read_corpus(out / "corpus.jsonl")))
