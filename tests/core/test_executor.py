"""Sharded execution: per-record filter steps on real Ray workers give what one process gives."""

from __future__ import annotations

import json
import sys

import pytest

from curate import api
from curate.core.errors import CurateError
from curate.core.executor import Executor, map_shards, map_unordered, merge_notes, split
from curate.core.records import Negative, Record
from tests.helpers import SHARED_DATA, read_jsonl, scifact_pairs


def test_split_keeps_order_and_balances():
    items = list(range(10))
    shards = split(items, 4)
    assert [len(s) for s in shards] == [3, 3, 2, 2] and sum(shards, []) == items
    assert split(items[:2], 5) == [[0], [1]]  # never an empty shard
    assert split([], 3) == [[]]


def test_notes_merge_counts_tallies_and_lists():
    merged = merge_notes([{"judged": 3, "verdicts": {"yes": 2, "no": 1}, "judges": ["a"], "min_gap": 1.5,
                           "mean": 0.4},
                          {"judged": 4, "verdicts": {"no": 5}, "judges": ["a", "b"], "min_gap": 1.5, "mean": 0.6}])
    assert merged == {"judged": 7, "verdicts": {"yes": 2, "no": 6}, "judges": ["a", "b"], "min_gap": 1.5,
                      "mean": None}


def test_bad_executor_settings_and_a_missing_ray_are_one_line(monkeypatch):
    with pytest.raises(CurateError, match="choose local or ray"):
        Executor("dask")
    with pytest.raises(CurateError, match="--workers must be at least 1"):
        Executor("ray", 0)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(CurateError, match=r"needs Ray: pip install 'curate\[ray\]'"):
        map_shards(len, [[1], [2]], Executor("ray", 2))
    with pytest.raises(CurateError, match=r"needs Ray"):
        next(map_unordered(len, [[1], [2]], Executor("ray", 2)))
    assert map_shards(len, [[1], [2, 3]], Executor()) == [1, 2]  # local needs no Ray
    assert list(map_unordered(len, [[1], [2, 3]], Executor())) == [(0, 1), (1, 2)]


def _planted(path, n: int = 48):
    """SciFact texts with faults the heuristics and sts_gap steps catch, spread over the file."""
    pairs = scifact_pairs(n, max_chars=500)
    recs = []
    for i, (q, d) in enumerate(pairs):
        negs = [Negative(text=pairs[(i + j) % n][1], level=j, score=float(9 - 2 * j)) for j in (1, 2, 3)]
        family = "sts" if i % 4 == 3 else "short-long"
        if i % 7 == 1:
            negs[0] = Negative(text=d, level=1)  # the positive again
        if i % 9 == 2:
            negs[1] = Negative(text="This is a hard negative: unlike the positive, it does not help.", level=2)
        if i % 11 == 5:
            q = "Q?"  # too short
        recs.append(Record(id=f"r{i}", task_type=family, task="Given a claim, find evidence.", query=q, positive=d,
                           negatives=negs, positive_score=9.0 if family == "sts" else None))
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs), encoding="utf-8")
    return path


def _filter_here_and_on_ray(tmp_path, records, steps: str) -> tuple[dict, dict]:
    """The recipe in one process and on 3 Ray workers: the same kept records and drop lines."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"steps:\n{steps}")
    local = api.filter(api.FilterOptions(inp=str(records), out=str(tmp_path / "local"), recipe=str(recipe)))
    on_ray = api.filter(api.FilterOptions(inp=str(records), out=str(tmp_path / "ray"), recipe=str(recipe),
                                          executor=api.Executor("ray", 3)))
    for name in ("filtered.jsonl", "rejected.jsonl"):
        assert read_jsonl(tmp_path / "ray" / name) == read_jsonl(tmp_path / "local" / name), name
    return local, on_ray


def test_map_steps_on_ray_workers_match_one_process(tmp_path):
    pytest.importorskip("ray")
    local, on_ray = _filter_here_and_on_ray(tmp_path, _planted(tmp_path / "in.jsonl"),
                                            "  - heuristics: {}\n  - minhash: {}\n  - sts_gap: {min_gap: 3}\n")
    # the faults were there to find: every step dropped something
    assert all(row["records_dropped"] or row["negatives_dropped"] for row in local["steps"])
    drop = lambda row: {k: v for k, v in row.items() if k not in ("seconds", "shards")}  # noqa: E731
    assert [drop(r) for r in on_ray["steps"]] == [drop(r) for r in local["steps"]]
    # heuristics and sts_gap ran as three shards; minhash sees every record (run in stages from here)
    assert [r.get("shards") for r in on_ray["steps"]] == [3, None, 3]
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert (run["params"]["executor"]["kind"], run["params"]["executor"]["workers"]) == ("ray", 3)


def _fails_on_odd(shard: list[int]) -> int:
    if shard[0] % 2:
        raise CurateError(f"shard {shard[0]}: a step's own error")
    return shard[0]


def test_a_workers_curate_error_is_its_one_line(tmp_path):
    pytest.importorskip("ray")
    with pytest.raises(CurateError, match=r"^shard 1: a step's own error$"):
        map_shards(_fails_on_odd, [[0], [1]], Executor("ray", 2))
    assert map_shards(_fails_on_odd, [[0], [2]], Executor("ray", 2)) == [0, 2]


def _scifact_world(tmp_path, n_queries: int = 16, n_docs: int = 260):
    """Real claims with their first relevant abstract, over a slice of the real corpus."""
    folder = SHARED_DATA / "scifact"
    corpus = [json.loads(line) for line in open(folder / "corpus.jsonl", encoding="utf-8")][:n_docs]
    ids = {d["_id"] for d in corpus}
    queries = {json.loads(line)["_id"]: json.loads(line)["text"] for line in open(folder / "queries.jsonl")}
    pairs = []
    for line in open(folder / "qrels" / "train.tsv", encoding="utf-8").read().splitlines()[1:]:
        qid, did, _ = line.split("\t")
        if did in ids and len(pairs) < n_queries:
            pairs.append({"query": queries[qid], "positive": next(d["text"] for d in corpus if d["_id"] == did),
                          "query_id": qid})
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps({"_id": d["_id"], "text": d["text"]}) + "\n"
                                                   for d in corpus))
    return tmp_path / "pairs.jsonl", tmp_path / "corpus.jsonl"


@pytest.mark.bench
def test_mine_encodes_on_ray_workers_with_the_same_result(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    import numpy as np

    pairs, corpus = _scifact_world(tmp_path)
    mined, vectors = {}, {}
    for name, executor in (("local", api.Executor()), ("ray", api.Executor("ray", 2))):
        cache = tmp_path / f"cache-{name}"  # each run encodes everything itself
        monkeypatch.setenv("CURATE_CACHE_DIR", str(cache))
        report = api.mine(api.MineOptions(out=str(tmp_path / name), pairs=str(pairs), corpus=str(corpus),
                                          batch_size=4, plots=False, executor=executor))
        # the corpus and the queries, none from a cache (in 128-text shards: a round of two, then one, on Ray)
        assert report["teachers"][0]["texts_encoded"] > 260 and report["teachers"][0]["cache_hits"] == 0
        mined[name] = read_jsonl(tmp_path / name / "mined.jsonl")
        from curate.embed.cache import EmbeddingCache
        from curate.embed.teacher import Teacher

        texts = [json.loads(line)["text"] for line in corpus.read_text().splitlines()][:50]
        vectors[name] = EmbeddingCache(cache / "embeddings").get_many(Teacher().model_id, "", texts)
    # the workers' vectors went into the driver's cache, and they are the ones this process makes
    assert all(v is not None for v in vectors["ray"])
    assert np.allclose(np.stack(vectors["ray"]), np.stack(vectors["local"]), atol=1e-5)
    negatives = lambda rows: [[n["doc_id"] for n in r["negatives"]] for r in rows]  # noqa: E731
    assert len(mined["ray"]) == len(mined["local"]) == 16
    assert negatives(mined["ray"]) == negatives(mined["local"])
    run = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert run["params"]["executor"]["kind"] == "ray"


def test_a_sharded_index_answers_as_one_flat_index():
    pytest.importorskip("ray")
    import numpy as np

    from curate.negatives.search import SearchIndex
    from curate.negatives.sharded import ShardedIndex

    rng = np.random.default_rng(3)
    docs = rng.standard_normal((1001, 24)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    queries = docs[:40] + 0.1 * rng.standard_normal((40, 24)).astype(np.float32)
    one, sharded = SearchIndex(docs, "flat"), ShardedIndex(docs, "flat", Executor("ray", 2))
    try:
        assert sharded.shards == [501, 500]
        for k in (1, 10, 600, 1001, 5000):  # within a shard, deeper than one, the whole corpus
            s1, i1 = one.search(queries, k)
            s2, i2 = sharded.search(queries, k)
            assert np.allclose(s1, s2, atol=1e-6), k
            for row, col in zip(*np.nonzero(i1 != i2)):  # only equal scores may come in another order
                near = s1[row, max(0, col - 1):col + 2]
                assert np.sum(np.abs(near - s1[row, col]) < 1e-6) > 1, (k, row, col)
            assert (i1 == i2).mean() > 0.99
    finally:
        sharded.close()


def test_mine_on_ray_searches_the_corpus_in_shards_with_the_same_records(tmp_path):
    """Each Ray worker holds one shard's index; the driver merges their top k, and a query whose
    candidates run out (a first window of 8) searches again, deeper, on its own."""
    pytest.importorskip("ray")
    from curate.mine.main import MineOptions, run_mine
    from tests.mine_helpers import HashTeacher

    pairs, corpus = _scifact_world(tmp_path, n_queries=16, n_docs=260)
    reports = {}
    for name, executor in (("local", Executor()), ("ray", Executor("ray", 2))):
        reports[name] = run_mine(MineOptions(out=str(tmp_path / name), pairs=str(pairs), corpus=str(corpus),
                                             depth=8, plots=False, executor=executor),
                                 teachers=[HashTeacher("hash", dim=64)])
    assert read_jsonl(tmp_path / "ray" / "mined.jsonl") == read_jsonl(tmp_path / "local" / "mined.jsonl")
    assert len(read_jsonl(tmp_path / "local" / "mined.jsonl")) == 16
    assert reports["ray"]["search"]["index"]["shards"] == [130, 130]
    assert reports["ray"]["teachers"][0]["queries_searched_deeper"] > 0


def _copies(path, n: int = 240):
    """SciFact claims and abstracts with planted near-copies: a query with one word changed, an
    abstract with one word changed, and a task asked twice with the query's words shuffled."""
    pairs = scifact_pairs(n, max_chars=600)
    recs = []
    for i, (q, d) in enumerate(pairs):
        recs.append(Record(id=f"r{i}", task_type="short-long", task=f"Find evidence for claim kind {i % 5}.",
                           query=q, positive=d, negatives=[Negative(text=pairs[(i + 1) % n][1], level=1)],
                           positive_score=float(i % 10)))
    for i in range(0, n, 6):
        q, d = pairs[i]
        words = q.split()
        recs.append(Record(id=f"q-copy{i}", task_type="short-long", task="Another task entirely, about claims.",
                           query=" ".join(words[:-1] + ["indeed"]) if len(words) > 12 else q + " indeed",
                           positive=pairs[(i + 3) % n][1] + " appended", negatives=[Negative(text="x y z")],
                           positive_score=5.0))
        recs.append(Record(id=f"d-copy{i}", task_type="short-long", task="Yet another task on abstracts.",
                           query=f"an unrelated question number {i}", positive=d.replace(" the ", " a ", 1),
                           negatives=[Negative(text="x y z")], positive_score=1.0))
        recs.append(Record(id=f"t-copy{i}", task_type="short-long", task=f"Find evidence for claim kind {i % 5}!",
                           query=" ".join(reversed(words)), positive=pairs[(i + 7) % n][1] + " different",
                           negatives=[Negative(text="x y z")], positive_score=0.5))
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs), encoding="utf-8")
    return path


def test_minhash_on_ray_runs_in_stages_and_drops_what_one_process_drops(tmp_path):
    """Signatures as a map, band buckets grouped by key, components in the driver: the same kept
    member (the best by margin) and the same rejected.jsonl lines as the step in one process."""
    pytest.importorskip("ray")
    local, staged = _filter_here_and_on_ray(tmp_path, _copies(tmp_path / "in.jsonl"), "  - minhash: {}\n")
    dropped = local["steps"][0]["records_dropped"]
    assert min(dropped.get(f"near-duplicate-{f}", 0) for f in ("query", "positive", "task")) >= 10, dropped
    assert staged["steps"][0]["records_dropped"] == dropped


def test_staged_groups_match_one_process_on_many_texts():
    pytest.importorskip("ray")
    from curate.dedup.minhash import find_duplicate_groups
    from curate.dedup.staged import staged_groups

    texts = [t for pair in scifact_pairs(1500, max_chars=400) for t in pair]
    texts += [t.replace(" of ", " for ", 1) for t in texts[::5]]  # near-copies
    texts += ["", "   "]  # no words: never grouped
    local = find_duplicate_groups(texts, 0.7, lsh="numpy")
    res = staged_groups([(texts, 3, 0.7)], Executor("ray", 3))
    assert res.groups == local and len(local) > 300
    assert list(res.rows) == sorted({m for g in local for m in g})
