"""Self-tests of the fake OpenAI-compatible server used by the fault-injection tests."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

try:  # the venv ships httpx under the name httpx2
    import httpx
except ImportError:  # pragma: no cover
    import httpx2 as httpx  # type: ignore[no-redef]

try:
    from tests.fake_llm_server import MALFORMED_TEXT, build_instance, fake_llm_server
except ImportError:  # pragma: no cover - tests/ on sys.path without a package
    from fake_llm_server import MALFORMED_TEXT, build_instance, fake_llm_server

GEN_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 3, "maxLength": 300},
        "positive": {"type": "string", "minLength": 20, "maxLength": 3500},
        "positive_score": {"type": "integer", "minimum": 1, "maximum": 10},
        "positive_answerable": {"type": "boolean"},
        "negatives": {
            "type": "array",
            "minItems": 4,
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "text": {"type": "string", "minLength": 20, "maxLength": 3500},
                    "score": {"type": "integer", "minimum": 1, "maximum": 10},
                    "answerable": {"type": "boolean"},
                },
                "required": ["text", "score", "answerable"],
            },
        },
    },
    "required": ["query", "positive", "positive_score", "positive_answerable", "negatives"],
}
TASKS_SCHEMA = {
    "type": "object",
    "properties": {
        "tasks": {
            "type": "array",
            "minItems": 1,
            "maxItems": 12,
            "items": {"type": "string", "minLength": 20, "maxLength": 220},
        }
    },
    "required": ["tasks"],
}


def _body(prompt: str, schema: dict = GEN_SCHEMA, **extra) -> dict:
    return {
        "model": "fake",
        "messages": [{"role": "user", "content": prompt}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}},
        "seed": 0,
        **extra,
    }


FAKE_LLM_TIMEOUT_SLEEP = 30  # the shared ``srv`` fixture's timeout fault sleeps this long here


@pytest.fixture
def client(srv):
    with httpx.Client(base_url=srv.base_url, timeout=10) as c:
        yield c


def _content(resp) -> tuple[str, str]:
    data = resp.json()
    ch = data["choices"][0]
    return ch["message"]["content"], ch["finish_reason"]


def test_health_and_models(srv, client):
    assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
    r = httpx.get(srv.root_url + "/health", timeout=5)
    assert r.status_code == 200 and r.json()["status"] == "ok"
    r = client.get("/models")
    assert r.status_code == 200
    assert [m["id"] for m in r.json()["data"]] == ["fake"]


def test_ok_satisfies_schema_and_has_usage(client, srv):
    r = client.post("/chat/completions", json=_body("Your retrieval task is: find things.\nGo."))
    assert r.status_code == 200
    content, finish = _content(r)
    assert finish == "stop"
    obj = json.loads(content)
    jsonschema.validate(obj, GEN_SCHEMA)
    # positive scored highest and answerable; negatives falling and unanswerable
    scores = [n["score"] for n in obj["negatives"]]
    assert obj["positive_score"] > scores[0] and scores == sorted(scores, reverse=True)
    assert obj["positive_answerable"] is True and not any(n["answerable"] for n in obj["negatives"])
    texts = [obj["positive"]] + [n["text"] for n in obj["negatives"]]
    assert len(set(texts)) == len(texts)
    u = r.json()["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] > 0
    assert srv.requests[-1].action == "ok" and srv.requests[-1].key is None


def test_tasks_property_gives_distinct_sentences(client):
    r = client.post("/chat/completions", json=_body("Think up tasks.", TASKS_SCHEMA))
    obj = json.loads(_content(r)[0])
    jsonschema.validate(obj, TASKS_SCHEMA)
    assert len(obj["tasks"]) == len(set(obj["tasks"])) >= 1


def test_build_instance_variety():
    import random

    schema = {
        "$defs": {"n": {"type": "number", "minimum": 0.5, "maximum": 2}},
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/n"},
            "b": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 5}]},
            "c": {"enum": ["x", "y"]},
            "d": {"type": ["integer", "null"], "minimum": 3},
            "e": {"type": "array", "items": {"type": "boolean"}, "minItems": 2},
        },
        "required": ["a", "b", "c", "d", "e"],
        "additionalProperties": False,
    }
    obj = build_instance(schema, random.Random(1))
    jsonschema.validate(obj, schema)


def test_marker_sequence_per_key(client, srv):
    p = "Your retrieval task is: FAULTS[429,500,503,ok] Find A.\nMore text."
    statuses = [client.post("/chat/completions", json=_body(p)).status_code for _ in range(5)]
    assert statuses == [429, 500, 503, 200, 200]
    key = "FAULTS[429,500,503,ok] Find A."
    assert srv.counts[key] == 5
    assert srv.actions_for("Find A.") == ["429", "500", "503", "ok", "ok"]
    # a different task text with the same marker has its own counter
    p2 = p.replace("Find A.", "Find B.")
    assert client.post("/chat/completions", json=_body(p2)).status_code == 429
    assert srv.count_for("Find B.") == 1


def test_429_retry_after_headers_and_error_body(client):
    p = "task: FAULTS[429] x"
    r = client.post("/chat/completions", json=_body(p))
    assert r.status_code == 429 and r.headers["retry-after"] == "1"
    assert "error" in r.json()
    r = client.post("/chat/completions", json=_body("task: FAULTS[429s0] y"))
    assert r.status_code == 429 and r.headers["retry-after"] == "0"
    r = client.post("/chat/completions", json=_body("task: FAULTS[503] z"))
    assert r.status_code == 503 and r.json()["error"]["message"]


def test_content_faults(client):
    def get(action):
        r = client.post("/chat/completions", json=_body(f"task: FAULTS[{action}] t-{action}"))
        assert r.status_code == 200
        return _content(r)

    c, f = get("malformed")
    assert c == MALFORMED_TEXT and f == "stop"
    with pytest.raises(json.JSONDecodeError):
        json.loads(c)
    c, f = get("truncated")
    assert f == "stop" and c.startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(c)
    c, f = get("length")
    assert f == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(c)
    c, f = get("badschema")
    obj = json.loads(c)
    assert isinstance(obj, dict)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(obj, GEN_SCHEMA)


def test_drop_closes_without_response(srv):
    with httpx.Client(base_url=srv.base_url, timeout=5) as c:
        with pytest.raises(httpx.TransportError):
            c.post("/chat/completions", json=_body("task: FAULTS[drop,ok] d"))
        r = c.post("/chat/completions", json=_body("task: FAULTS[drop,ok] d"))
        assert r.status_code == 200
    assert srv.actions_for("] d") == ["drop", "ok"]
    assert srv.requests_for("] d")[0].status is None


def test_timeout_then_ok_and_fast_shutdown():
    with fake_llm_server(timeout_sleep=30) as s:
        with httpx.Client(base_url=s.base_url, timeout=0.5) as c:
            t0 = time.monotonic()
            with pytest.raises(httpx.TimeoutException):
                c.post("/chat/completions", json=_body("task: FAULTS[timeout,ok] slow"))
            assert time.monotonic() - t0 < 5
            r = c.post("/chat/completions", json=_body("task: FAULTS[timeout,ok] slow"))
            assert r.status_code == 200
        t0 = time.monotonic()
    # leaving the context interrupts the 30 s sleep at once
    assert time.monotonic() - t0 < 3


def test_marker_found_in_earlier_user_turn(client, srv):
    """A re-ask appends assistant + user turns; the marker in the first prompt still counts."""
    body = _body("task: FAULTS[malformed,ok] reask")
    r1 = client.post("/chat/completions", json=body)
    assert _content(r1)[0] == MALFORMED_TEXT
    body["messages"] += [
        {"role": "assistant", "content": MALFORMED_TEXT},
        {"role": "user", "content": "That was not valid JSON. Reply with the JSON object only."},
    ]
    r2 = client.post("/chat/completions", json=body)
    json.loads(_content(r2)[0])
    assert srv.actions_for("reask") == ["malformed", "ok"]


def test_concurrent_counters_are_exact(srv):
    p = "task: FAULTS[500,500,ok] conc"
    with httpx.Client(base_url=srv.base_url, timeout=10) as c:
        with ThreadPoolExecutor(8) as ex:
            codes = list(ex.map(lambda _: c.post("/chat/completions", json=_body(p)).status_code, range(12)))
    assert sorted(codes) == [200] * 10 + [500] * 2
    assert srv.count_for("conc") == 12


def test_openai_client_against_fake(srv):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=5)
    resp = client.chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": "task: FAULTS[ok] via openai"}],
        response_format={"type": "json_schema", "json_schema": {"name": "g", "schema": GEN_SCHEMA}},
        seed=0,
    )
    jsonschema.validate(json.loads(resp.choices[0].message.content), GEN_SCHEMA)
    assert resp.usage.total_tokens > 0
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "task: FAULTS[429] rl"}]
        )
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(
            model="fake", messages=[{"role": "user", "content": "task: FAULTS[drop] dr"}]
        )
    assert srv.requests_for("via openai")[0].body["response_format"]["type"] == "json_schema"


def test_max_inflight_counts_overlap(srv):
    p = "task: FAULTS[timeout1] inflight"
    with ThreadPoolExecutor(3) as ex:
        list(ex.map(lambda _: httpx.post(srv.base_url + "/chat/completions", json=_body(p), timeout=5), range(3)))
    assert srv.max_inflight() == 3
    assert all(r.t_done is not None and r.t_done - r.t >= 0.9 for r in srv.chat_requests)
