"""`curate generate --from-corpus DOCS`: a query per sampled passage of the user's documents.

Fast tests run the CLI against the scripted fake server (tests/fake_llm_server.py); one e2e
test runs the bundled model on two SciFact passages.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.core.records import Record
from curate.datasets.corpus import read_corpus
from curate.llm.taskspec import load_spec
from tests.fake_llm_server import fake_llm_server
from tests.helpers import REPO, SHARED_DATA, assert_one_line_error, read_jsonl, run_curate
from tests.generate.test_from_pairs import _env

OFFLINE = "http://127.0.0.1:9/v1"  # nothing listens: a request would fail the run


def _docs(folder: Path) -> Path:
    folder.mkdir()
    (folder / "tides.md").write_text(
        "# Ocean tides\n\nTides come from the pull of the Moon and the Sun on the oceans.\n\n"
        "Spring tides happen when the Sun, Moon and Earth line up, giving the largest range.\n", encoding="utf-8")
    (folder / "qubits.txt").write_text(
        "A qubit is the basic unit of quantum information.\n\n"
        "Unlike a bit, it can be in a superposition of zero and one until it is measured.\n", encoding="utf-8")
    (folder / "aspirin.html").write_text(
        "<html><head><title>Aspirin</title><style>p {color: red}</style></head><body>"
        "<p>Aspirin irreversibly inhibits platelet cyclooxygenase, which reduces clotting.</p>"
        "<p>Low doses are used to prevent heart attacks in people at high risk.</p></body></html>",
        encoding="utf-8")
    return folder


def _generate(srv_url: str, docs: Path, out: Path, *extra: str):
    proc = run_curate("generate", "--from-corpus", str(docs), "--out", str(out), "--base-url", srv_url,
                      "--model", "m", "--max-retries", "0", "--max-reasks", "0", "--backoff-base", "0.01",
                      "--timeout", "10", *extra, env=_env(out.parent / "home"), timeout=300)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def _check(rec: dict, corpus: dict[str, str]) -> Record:
    r = Record.from_dict(rec)
    assert r.task_type == "from-corpus"
    assert r.positive_id in corpus and r.positive == corpus[r.positive_id], "the passage, verbatim, under its id"
    assert r.query.strip() and r.negatives == []
    assert r.meta["passage"]["id"] == r.positive_id
    assert r.meta["passage"]["doc_id"] == r.positive_id.rsplit("#", 1)[0]
    assert r.meta["template"] == "generate/from-corpus.j2"
    assert "positive" not in r.meta["placeholders"]
    return r


def test_queries_for_sampled_passages_of_a_folder(tmp_path):
    docs = _docs(tmp_path / "docs")
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        proc = _generate(srv.base_url, docs, out, "-n", "3", "--set", "language=German")
        assert proc.returncode == 0, proc.stderr
        sent = list(srv.chat_requests)
        again = _generate(srv.base_url, docs, out, "-n", "3", "--set", "language=German")
        assert again.returncode == 0, again.stderr
        assert len(srv.chat_requests) == len(sent), "a finished run sends nothing"
    assert str(out / "corpus.jsonl") in proc.stdout + proc.stderr, "the corpus path is printed at the end"
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == len(sent) == 3
    assert len({r["id"] for r in records}) == 3, "the re-run duplicated nothing"
    corpus = dict(read_corpus(out / "corpus.jsonl"))
    assert len(corpus) == 3 and {i.split("#")[0] for i in corpus} == {"tides", "qubits", "aspirin"}
    assert corpus["tides#0"].startswith("Ocean tides Tides come"), "the title goes before the text"
    assert corpus["aspirin#0"].startswith("Aspirin Aspirin irreversibly")
    assert {r["positive_id"] for r in records} == set(corpus)
    answers = {}  # the query the server wrote, by the passage its prompt showed
    for req in sent:
        prompt = req.body["messages"][-1]["content"]
        (pid,) = [i for i, text in corpus.items() if text in prompt]
        answers[pid] = json.loads(req.content)["query"].strip()
        schema = req.body["response_format"]["json_schema"]["schema"]
        assert "positive" not in schema["properties"] and "query" in schema["required"]
        assert "German" in prompt
    for rec in records:
        r = _check(rec, corpus)
        assert r.query == answers[r.positive_id], "the query is the model's answer"
        assert r.task == load_spec("from-corpus").fixed_tasks[0]
        assert r.meta["placeholders"]["language"] == "German"
    drawn = [{k: v for k, v in r["meta"]["placeholders"].items() if k != "language"} for r in records]
    assert len({json.dumps(d, sort_keys=True) for d in drawn}) == 3, "each item draws its own attributes"
    summary = json.loads((out / "report.json").read_text())
    assert summary["counts"]["resumed"] == 3 and summary["families"]["from-corpus"]["passages"] == 3


def test_sample_is_seeded_and_grows_with_n(tmp_path):
    """-n samples without replacement; a larger -n keeps the earlier passages and adds to them."""
    from curate.datasets.documents import read_documents
    from curate.generate.from_corpus import sample_passages

    docs = read_documents(SHARED_DATA / "scifact" / "corpus.jsonl")
    two, five = sample_passages(docs, 2, seed=7), sample_passages(docs, 5, seed=7)
    assert [p.id for p in five[:2]] == [p.id for p in two] and len({p.id for p in five}) == 5
    assert [p.id for p in sample_passages(docs, 5, seed=8)] != [p.id for p in five]
    assert len(sample_passages(docs, None, seed=7)) == len(docs.passages)

    out = tmp_path / "out"
    with fake_llm_server() as srv:
        assert _generate(srv.base_url, SHARED_DATA / "scifact", out, "-n", "2", "--seed", "7").returncode == 0
        assert _generate(srv.base_url, SHARED_DATA / "scifact", out, "-n", "5", "--seed", "7").returncode == 0
        assert len(srv.chat_requests) == 5, "the first two passages were not asked again"
    records = read_jsonl(out / "generated.jsonl")
    assert {r["positive_id"] for r in records[:2]} == {p.id for p in two}, "the first run's (in finishing order)"
    assert {r["positive_id"] for r in records} == {p.id for p in five}
    corpus = dict(read_corpus(out / "corpus.jsonl"))
    assert len(corpus) == len(docs.passages)
    for rec in records:
        _check(rec, corpus)


def test_bad_inputs_are_one_line_before_any_request(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = run_curate("generate", "--from-corpus", str(tmp_path / "empty"), "--out", str(tmp_path / "o"),
                      "--base-url", OFFLINE, "--model", "m")
    assert proc.returncode == 2
    assert_one_line_error(proc, "empty", "no readable documents")
    assert not (tmp_path / "o").exists()
    docs = _docs(tmp_path / "docs")
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "q", "positive": "p"}) + "\n")
    for args, needles in [
        (["--from-corpus", str(docs), "--from-pairs", str(pairs)], ["--from-pairs", "--from-corpus"]),
        (["--from-corpus", str(docs), "--task", "sts"], ["--from-corpus", "sts"]),
        (["--from-corpus", str(docs), "--task", "from-pairs"], ["--from-corpus", "from-pairs"]),
        (["--task", "from-corpus"], ["from-corpus", "--from-corpus DOCS"]),
    ]:
        proc = run_curate("generate", *args, "--out", str(tmp_path / "o"), "--base-url", OFFLINE, "--model", "m")
        assert proc.returncode == 2
        assert_one_line_error(proc, *needles)
    assert not (tmp_path / "o").exists()


@pytest.mark.e2e
def test_bundled_model_on_two_scifact_passages(tmp_path):
    out = tmp_path / "out"
    proc = run_curate("generate", "--from-corpus", str(SHARED_DATA / "scifact"), "-n", "2", "--out", str(out),
                      "--max-chars", "300")
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(out / "generated.jsonl")
    failed = read_jsonl(out / "failed.jsonl")
    assert len(records) + len(failed) == 2, "every passage ends as a record or a failure"
    assert records, f"the bundled model gave no valid record: {[f['reason'] for f in failed]}"
    corpus = dict(read_corpus(out / "corpus.jsonl"))
    for rec in records:
        r = _check(rec, corpus)
        assert 0 < len(r.query) <= 300
        print(f"{r.positive_id}: {r.query!r}")


@pytest.mark.bench
def test_multihop_bundles_are_nearest_passages_and_all_positives(tmp_path, teacher):
    """--task from-corpus-multihop: each item shows the sampled passage and its nearest
    neighbours by the teacher (2 or 3 in all), the record keeps every one as a labelled
    positive, and mining never takes one of them as a negative."""
    import numpy as np

    from curate.datasets.documents import read_documents
    from curate.generate.bundles import bundle_size

    docs_dir = REPO / "data" / "demo"
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        proc = _generate(srv.base_url, docs_dir, out, "-n", "6", "--task", "from-corpus-multihop")
        assert proc.returncode == 0, proc.stderr
        prompts = [req.body["messages"][-1]["content"] for req in srv.chat_requests]
    records = [Record.from_dict(r) for r in read_jsonl(out / "generated.jsonl")]
    corpus = dict(read_corpus(out / "corpus.jsonl"))
    assert len(records) == len(prompts) == 6

    docs = read_documents(docs_dir)
    by_id = {p.id: p for p in docs.passages}
    ids = list(corpus)
    vectors = teacher.encode_docs([corpus[i] for i in ids])
    sizes = []
    for r in records:
        bundle = [r.positive_id, *(p.doc_id for p in r.positives)]
        sizes.append(len(bundle))
        assert r.task_type == "from-corpus-multihop" and r.meta["bundle"] == bundle
        assert len(bundle) == bundle_size(by_id[r.positive_id], (2, 3), 0), "the size drawn for this passage"
        for pid, text in zip(bundle, [r.positive, *(p.text for p in r.positives)]):
            assert text == corpus[pid], "each passage verbatim under its corpus id"
        (prompt,) = [p for p in prompts if f"Passage 1:\n{corpus[r.positive_id]}" in p]
        for i, pid in enumerate(bundle, 1):
            assert f"Passage {i}:\n{corpus[pid]}" in prompt, "the prompt shows the whole bundle, seed first"
        assert f"needs all {len(bundle)} passages" in prompt
        scores = vectors @ vectors[ids.index(r.positive_id)]
        nearest = [ids[j] for j in np.argsort(-scores) if ids[j] != r.positive_id][:len(bundle) - 1]
        assert bundle[1:] == nearest, "the teacher's nearest passages, best first (one passage a demo file)"
    assert set(sizes) == {2, 3}
    summary = json.loads((out / "report.json").read_text())
    assert summary["families"]["from-corpus-multihop"]["bundle_sizes"] == {str(k): sizes.count(k) for k in (2, 3)}

    mined = tmp_path / "mined"
    proc = run_curate("mine", "--in", str(out / "generated.jsonl"), "--corpus", str(out / "corpus.jsonl"),
                      "--out", str(mined), env=_env(tmp_path / "home"), timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [Record.from_dict(r) for r in read_jsonl(mined / "mined.jsonl")]
    # the scripted queries are arbitrary words: how many negatives pass the positive-aware cut varies
    assert len(rows) == 6 and sum(len(r.negatives) for r in rows) >= 6
    for r in rows:
        assert {n.doc_id for n in r.negatives}.isdisjoint(r.meta["bundle"]), "no bundle passage is a negative"


def test_bundles_pass_over_passages_that_overlap_the_seed(tmp_path):
    """A long document's neighbouring passages share words by the cut's overlap: they are the
    teacher's nearest, and a bundle must not be made of them."""
    from curate.datasets.documents import read_documents
    from curate.generate.bundles import passage_bundles

    docs = read_documents(SHARED_DATA / "scifact" / "corpus.jsonl")
    long_doc = (tmp_path / "docs")
    long_doc.mkdir()
    words = " ".join(p.text for p in docs.passages[:12])  # one document of several passages
    (long_doc / "long.txt").write_text(words, encoding="utf-8")
    (long_doc / "other.txt").write_text(docs.passages[40].text, encoding="utf-8")
    cut = read_documents(long_doc)
    longs = [p for p in cut.passages if p.doc_id == "long"]
    assert len(longs) >= 4
    seed = longs[1]
    (bundle,) = passage_bundles(cut.passages, [seed], (3,), seed=0).values()
    assert bundle[0] == seed and len(bundle) == 3
    for p in bundle[1:]:
        assert not (p.doc_id == seed.doc_id and abs(p.k - seed.k) <= 1)
    assert len({(p.doc_id, p.k) for p in bundle}) == 3


def test_a_bad_bundle_in_a_spec_is_one_line(tmp_path):
    spec = (REPO / "tasks" / "from-corpus-multihop.yaml").read_text()
    bad = tmp_path / "hops.yaml"
    bad.write_text(spec.replace("bundle: [2, 3]", "bundle: [1, 9]").replace("family: from-corpus-multihop",
                                                                            "family: hops"))
    proc = run_curate("generate", "--from-corpus", str(_docs(tmp_path / "docs")), "--task", str(bad), "--out",
                      str(tmp_path / "o"), "--base-url", OFFLINE, "--model", "m")
    assert proc.returncode == 2
    assert_one_line_error(proc, "hops.yaml", "'bundle' must be a list of passage counts from 2 to 5")
