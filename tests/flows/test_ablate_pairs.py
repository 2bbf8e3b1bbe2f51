"""``curate ablate`` arms whose negatives the LLM writes for the split's own pairs
(``generate: {queries: pairs}``): LLM negatives alone (``mine: false``), mined ones alone, and
both, on the same training pairs. A tiny BEIR folder cut from SciFact; the scripted server writes
the negatives; a few CPU steps each."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.core.records import read_records
from curate.datasets.beir import load_beir, read_qrels
from curate.flows.ablate.main import AblateOptions, run_ablate
from tests.fake_llm_server import fake_llm_server
from tests.helpers import SHARED_DATA
from tests.mine_helpers import write_beir, write_qrels

GRID = """\
data: {data}
split: train
shown_positives: 1
eval: {{data: {data}, split: test, light: false}}
budget: {{steps: 2, batch_size: 4, lr: 2.0e-5, max_seq_length: 48}}
seeds: [0]
arms:
  mined: {{mine: {{k: 2}}}}
  llm: {{generate: {{queries: pairs, base_url: {url}, model: fake}}, mine: false}}
  both: {{generate: {{queries: pairs, base_url: {url}, model: fake}}, mine: {{k: 2}}}}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """6 SciFact training claims (one with two relevant abstracts), 6 test claims, their
    abstracts and 40 others."""
    tmp = tmp_path_factory.mktemp("ablate-pairs")
    train, test = load_beir(SHARED_DATA / "scifact", "train"), load_beir(SHARED_DATA / "scifact", "test")
    rng = random.Random(3)
    two = [q for q in sorted(train.qrels) if len(train.qrels[q]) > 1][:1]
    tq = two + rng.sample([q for q in sorted(train.qrels) if q not in two], 5)
    eq = rng.sample(sorted(test.qrels), 6)
    docs = ({d for q in tq for d in train.qrels[q]} | {d for q in eq for d in test.qrels[q]}
            | set(rng.sample(sorted(test.corpus), 40)))
    beir = write_beir(tmp / "beir", {d: test.corpus[d] for d in sorted(docs)},
                      {**{q: train.queries[q] for q in tq}, **{q: test.queries[q] for q in eq}},
                      {q: train.qrels[q] for q in tq})
    write_qrels(beir / "qrels" / "test.tsv", {q: test.qrels[q] for q in eq})
    return tmp, beir, tq


def test_llm_negatives_mined_ones_and_both_train_on_the_same_pairs(folder, monkeypatch):
    tmp, beir, tq = folder
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tmp / "cache"))
    with fake_llm_server() as srv:
        grid = tmp / "grid.yaml"
        grid.write_text(GRID.format(data=beir, url=srv.base_url))
        report = run_ablate(AblateOptions(grid=str(grid), out=str(tmp / "out"), say=lambda _: None))
        assert len(srv.requests) == len(tq), "one request per training pair (its most relevant positive only)"
    rows = {r["arm"]: r for r in report["summary"]}
    assert set(rows) == {"mined", "llm", "both"} and all(rows[a]["values"] for a in rows)
    assert report["arms"]["llm"]["mined"] is False and report["arms"]["both"]["mined"] is True

    from curate.flows.ablate.arms import cell_steps
    from curate.flows.ablate.cells import records_of, walk
    from curate.flows.ablate.grid import load_grid

    g = load_grid(grid)
    work = Path(report["out"])
    cells = {a.name: cell_steps(g, a, 0, work) for a in g.arms}
    found = {name: walk(steps, work)[0] for name, steps in cells.items()}
    qrels = Path(found["mined"]["queries"].out) / "qrels.tsv"
    by_arm = {name: read_records(records_of(steps, found[name])) for name, steps in cells.items()}
    stages = {name: [s.stage.name for s in steps if s.label in ("source", "filter", "mine")]
              for name, steps in cells.items()}
    assert stages == {"mined": ["mine"], "llm": ["generate"], "both": ["generate", "mine"]}
    # the pairs generate read are the training queries, each with its one shown positive
    view = Path(found["llm"]["source"].pairs)
    assert read_qrels(view / "qrels" / "train.tsv") == read_qrels(qrels)
    shown = read_qrels(qrels)
    assert sorted(shown) == sorted(tq) and all(len(d) == 1 for d in shown.values())
    corpus = load_beir(beir, "train").corpus
    for name in ("mined", "llm", "both"):
        assert sorted(r.query for r in by_arm[name]) == sorted(corpus_query(beir, q) for q in tq)
        for r in by_arm[name]:
            assert r.positive == corpus[next(iter(shown[_qid(beir, r.query)]))], "the shown positive"
    assert all(n.source == "llm" for r in by_arm["llm"] for n in r.negatives)
    assert all(len(r.negatives) == 4 for r in by_arm["llm"])
    for r in by_arm["both"]:
        llm = [n for n in r.negatives if n.source == "llm"]
        mined = [n for n in r.negatives if n.source != "llm"]
        assert len(llm) == 4, "the LLM's negatives are kept"
        assert mined and all(n.doc_id in corpus for n in mined), "and mined passages added"
    assert all(n.source != "llm" for r in by_arm["mined"] for n in r.negatives)


def corpus_query(beir: Path, qid: str) -> str:
    return _queries(beir)[qid]


def _qid(beir: Path, text: str) -> str:
    return {t: q for q, t in _queries(beir).items()}[text]


def _queries(beir: Path) -> dict[str, str]:
    return {o["_id"]: o["text"] for o in map(json.loads, (beir / "queries.jsonl").read_text().splitlines())}


@pytest.mark.parametrize("arm, needle", [
    ("{mine: false}", "mine: false needs generate"),
    ("{generate: {queries: pairs, passages: 10}}", "passages does not apply"),
    ("{generate: {queries: pears}}", "queries must be llm, title, first-sentence or pairs"),
])
def test_pairs_arm_errors_name_the_grid(folder, tmp_path, arm, needle):
    from curate.flows.ablate.grid import load_grid

    _, beir, _ = folder
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"data: {beir}\narms:\n  a: {arm}\n")
    with pytest.raises(CurateError) as e:
        load_grid(grid)
    assert needle in str(e.value) and str(grid) in str(e.value)
