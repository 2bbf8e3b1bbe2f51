"""``curate ablate`` arms that start from a corpus (``generate:``): the zero-label path judged by
training, as mining is. A tiny BEIR folder cut from SciFact with no training qrels at all; the
LLM arm talks to the scripted server, the title arm needs no LLM; a few CPU steps each."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from curate.flows.ablate.main import AblateOptions, run_ablate
from curate.core.errors import CurateError
from curate.core.records import read_records
from curate.core.stage import is_done
from curate.datasets.beir import load_beir
from curate.generate.from_corpus import extracted_query, first_sentence
from curate.datasets.documents import Passage
from tests.fake_llm_server import fake_llm_server
from tests.helpers import SHARED_DATA
from tests.mine_helpers import write_beir

GRID = """\
data: {data}
eval: {{data: {data}, split: test, light: false}}
budget: {{steps: 2, batch_size: 4, lr: 2.0e-5, max_seq_length: 48}}
seeds: [0]
arms:
  base: {{kind: base}}
  titles: {{generate: {{passages: 12, queries: title}}, filter: keep-copies.yaml, mine: {{k: 2}}}}
  llm: {{generate: {{passages: 6, base_url: {url}, model: fake}}, mine: {{k: 2}}}}
"""
RECIPE = """\
name: keep-copies
steps:
  - heuristics: {query_copy_min_words: null}
  - round_trip: {top_k: 10}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """10 SciFact test claims, their abstracts and 40 others; no train split."""
    tmp = tmp_path_factory.mktemp("ablate-corpus")
    test = load_beir(SHARED_DATA / "scifact", "test")
    rng = random.Random(5)
    eq = rng.sample(sorted(test.qrels), 10)
    docs = {d for q in eq for d in test.qrels[q]} | set(rng.sample(sorted(test.corpus), 40))
    beir = write_beir(tmp / "beir", {d: test.corpus[d] for d in sorted(docs)}, {q: test.queries[q] for q in eq}, {})
    raw = [json.loads(line) for line in (SHARED_DATA / "scifact" / "corpus.jsonl").read_text().splitlines()]
    (beir / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in raw if d["_id"] in docs))  # with titles
    (beir / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q in eq for d, s in test.qrels[q].items()))
    for f in (beir / "qrels").glob("*.tsv"):
        if f.name != "test.tsv":
            f.unlink()  # no labelled training query anywhere
    return tmp, beir


@pytest.mark.bench
def test_corpus_arms_train_from_documents_alone(folder, monkeypatch):
    tmp, beir = folder
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tmp / "cache"))
    (tmp / "keep-copies.yaml").write_text(RECIPE)

    def answer(body):  # the query the scripted model writes: the passage's first words, reworded
        prompt = body["messages"][-1]["content"]
        return {"query": "which study reports " + " ".join(prompt.split()[-12:-4])}

    with fake_llm_server(responder=answer) as srv:
        grid = tmp / "grid.yaml"
        grid.write_text(GRID.format(data=beir, url=srv.base_url))
        log: list[str] = []
        report = run_ablate(AblateOptions(grid=str(grid), out=str(tmp / "out"), say=log.append))
        sent = len(srv.requests)
        assert sent == 6, "one request per sampled passage"
        again = run_ablate(AblateOptions(grid=str(grid), out=str(tmp / "out"), say=log.append))
        assert len(srv.requests) == sent, "a finished grid sends nothing again"
    assert "0 run(s) to do" in log[-1]
    rows = {r["arm"]: r for r in report["summary"]}
    assert set(rows) == {"base", "titles", "llm"} and all(rows[a]["values"] for a in rows)
    assert again["summary"] == report["summary"]
    assert report["arms"]["llm"]["generate"]["passages"] == 6

    work = Path(report["out"])
    assert not (work / "queries").exists(), "no training qrels read or written"
    # each corpus arm's first stage: generate for the LLM arm, extract for the titles one; the
    # extracted folder holds the same files but is never taken for a finished generate run
    from curate.flows.ablate.arms import cell_steps
    from curate.flows.ablate.cells import walk
    from curate.flows.ablate.grid import load_grid
    from curate.generate.stage import STAGE as GENERATE, GenerateOptions
    from curate.mine.main import STAGE as MINE

    g = load_grid(grid)
    first = {a.name: (cell_steps(g, a, 0, work)[0].stage, walk(cell_steps(g, a, 0, work), work)[0]["source"])
             for a in g.arms if a.generate is not None}
    assert {a: stage.name for a, (stage, _) in first.items()} == {"titles": "extract", "llm": "generate"}
    assert all(is_done(stage, opts) for stage, opts in first.values())
    assert not is_done(GENERATE, GenerateOptions(out=first["titles"][1].out, corpus=str(beir), n=12))
    passages = {json.loads(line)["_id"] for f in [*(work / "generate").iterdir(), *(work / "extract").iterdir()]
                for line in GENERATE.path(f, "corpus").read_text().splitlines()}
    titles = {json.loads(line)["_id"]: json.loads(line).get("title", "") for line in
              (beir / "corpus.jsonl").read_text().splitlines()}
    mined = {f.name: read_records(MINE.path(f)) for f in (work / "mine").iterdir()}
    assert len(mined) == 2
    for records in mined.values():
        assert records
        for r in records:
            assert r.positive_id in passages, "the positive is one of the passages, under its id"
            assert r.positive_id.rsplit("#", 1)[0] in titles, "the positive is a passage of a corpus document"
            assert all(n.doc_id.rsplit("#", 1)[0] != r.positive_id.rsplit("#", 1)[0] for n in r.negatives), \
                "no passage of the query's own document is its negative"
    from_titles = [r for rs in mined.values() for r in rs if r.meta.get("query_from") == "title"]
    assert from_titles and all(r.query == " ".join(titles[r.positive_id.rsplit("#", 1)[0]].split())
                               for r in from_titles)
    from_llm = [r for rs in mined.values() for r in rs if r.query.startswith("which study reports")]
    assert from_llm, "the LLM arm trains on the queries the server wrote"


def test_extracted_queries():
    p = Passage(id="d#0", doc_id="d", title="  Tides   and the Moon ", text="The Moon pulls. The Sun too.",
                source="x", k=0)
    assert extracted_query(p, "title") == "Tides and the Moon"
    assert extracted_query(p, "first-sentence") == "The Moon pulls."
    untitled = Passage(id="e#1", doc_id="e", title="", text="No title here. Second one.", source="x", k=1)
    assert extracted_query(untitled, "title") == "No title here."
    assert first_sentence("one two three four", max_words=2) == "one two"


@pytest.mark.parametrize("arm, needle", [
    ("{generate: {queries: summary}}", "queries must be llm, title, first-sentence"),
    ("{generate: {passages: 1}}", "passages must be an integer of at least 2"),
    ("{generate: {base_url: 'http://x/v1'}}", "base_url needs model"),
    ("{generate: {pasages: 10}}", "unknown option 'pasages'"),
    ("{kind: base, generate: {}}", "belong to curate arms"),
])
def test_corpus_arm_errors_name_the_grid(folder, tmp_path, arm, needle):
    from curate.flows.ablate.grid import load_grid

    _, beir = folder
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"data: {beir}\nsplit: test\narms:\n  a: {arm}\n")
    with pytest.raises(CurateError) as e:
        load_grid(grid)
    assert needle in str(e.value) and str(grid) in str(e.value)
