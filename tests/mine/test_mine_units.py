"""Mining without a model: thresholds, sampling, depth, ensembles, inputs, errors (all fast)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from curate.core.errors import CurateError
from curate.mine.ensemble import Pick, assign_cross, interleave
from curate.negatives.search import SearchIndex
from curate.mine.inputs import Corpus, MineInput, MineItem, finalize, load_pairs_input, load_records_input
from curate.mine.main import MineOptions, run_mine
from curate.negatives.presets import Method
from curate.negatives.select import ABOVE_CEILING, BELOW_FLOOR, OUTSIDE_RANKS, VALID
from curate.mine.miner import MineConfig, mine
from curate.mine.report import false_negative_rate
from curate.mine.sampling import choose, query_rng
from curate.core.records import Negative, Record
from tests.mine_helpers import HashTeacher, write_jsonl

V, HI, LO, RK = VALID, ABOVE_CEILING, BELOW_FLOOR, OUTSIDE_RANKS

# ---------------------------------------------------------------------------- thresholds


def codes(method: Method, row, pos):
    return method.judge(np.array(row), pos).tolist()


def test_percpos_threshold_positive_and_negative_positive_scores():
    m = Method.make("percpos", relative_margin=0.05)
    assert m.ceiling(0.8) == pytest.approx(0.76)
    # at the ceiling is kept, above is dropped
    assert codes(m, [0.9, 0.7600001, 0.76, 0.5], 0.8) == [HI, HI, V, V]
    # a negative positive score: the ceiling stays below it (-0.21), where 0.95 * pos would be -0.19
    assert m.ceiling(-0.2) == pytest.approx(-0.21)
    assert codes(m, [-0.1, -0.19, -0.205, -0.2101, -0.3], -0.2) == [HI, HI, HI, V, V]
    assert m.ceiling(0.0) == 0.0
    # a negative margin would let negatives score above the positive: the guard off, so it is refused
    # (NV-Retriever's share 1.05 trained worse than 0.95)
    with pytest.raises(CurateError, match="at least 0.0"):
        Method.make("percpos", relative_margin=-0.05)


def test_marginpos_abs_naive_thresholds():
    mp = Method.make("marginpos")  # default absolute_margin 0.05
    assert mp.absolute_margin == 0.05 and mp.ceiling(0.8) == pytest.approx(0.75)
    assert codes(mp, [0.8, 0.76, 0.75, 0.1], 0.8) == [HI, HI, V, V]
    assert codes(mp, [-0.2, -0.24, -0.25, -0.26], -0.2) == [HI, HI, V, V]
    ab = Method.make("abs", max_score=0.7)
    assert codes(ab, [0.95, 0.71, 0.7, 0.2], 0.99) == [HI, HI, V, V]
    assert codes(ab, [0.95, 0.71, 0.7, 0.2], -0.5) == [HI, HI, V, V]  # the positive plays no part
    nv = Method.make("naive")
    assert codes(nv, [0.99, 0.5, -0.3], 0.1) == [V, V, V]


def test_rank_methods_and_floor():
    sh = Method.make("shift", shift=2)
    assert codes(sh, [0.9, 0.8, 0.7, 0.6], 0.5) == [RK, RK, V, V]
    assert Method.make("shift").shift == 10
    win = Method.make("window", range_min=1, range_max=3)  # skip 1, none past rank 3: ranks 2..3
    assert codes(win, [0.9, 0.8, 0.7, 0.6], 0.5) == [RK, V, V, RK]
    assert win.last_useful_rank() == 3
    assert (Method.make("window").range_min, Method.make("window").range_max) == (29, 100)  # ranks 30..100
    fl = Method.make("percpos", relative_margin=0.05, min_score=0.3)
    assert codes(fl, [0.9, 0.5, 0.3, 0.29], 0.8) == [HI, V, V, LO]


def test_method_parameter_errors():
    for bad in (lambda: Method.make("nope"), lambda: Method.make("percpos", relative_margin=1),
                lambda: Method.make("naive", relative_margin=0.1), lambda: Method.make("percpos", max_score=0.5),
                lambda: Method.make("window", range_min=5, range_max=2),
                lambda: Method.make("window", range_min=5, range_max=5), lambda: Method.make("shift", shift=-1),
                lambda: Method.make("abs", shift=3), lambda: Method.make("percpos", relative_margin=math.nan),
                lambda: Method.make("percpos", margin=0), lambda: Method.make("window", range_min=-1)):
        with pytest.raises(CurateError):
            bad()


def test_short_reasons():
    pp = Method.make("percpos")
    assert pp.short_reason(np.linspace(0.9, 0.8, 6), 0.5, 4, True) == "positive scores below every candidate"
    assert pp.short_reason(np.array([0.9, 0.8, 0.7, 0.6, 0.3]), 0.5, 4, True) == \
        "too few candidates below the positive-based threshold"
    assert pp.short_reason(np.array([0.4, 0.3]), 0.5, 4, True) == \
        "corpus has fewer than k documents besides the positives"
    fl = Method.make("percpos", min_score=0.35)
    assert fl.short_reason(np.array([0.4, 0.3, 0.2, 0.1, 0.0]), 0.5, 4, False) == \
        "not enough candidates above the floor"
    assert Method.make("window", range_min=2, range_max=4).short_reason(
        np.arange(10.0)[::-1], 0.5, 4, False) == "not enough candidates in the rank window"


# ---------------------------------------------------------------------------- sampling


def test_sampling_top_uniform_softmax_top1():
    scores = np.linspace(0.9, 0.5, 20)
    assert choose(scores, 4).tolist() == [0, 1, 2, 3]
    assert choose(scores[:2], 4).tolist() == [0, 1]
    for strategy in ("uniform", "softmax", "top1+"):
        a = choose(scores, 4, strategy, pool=10, temperature=0.05, rng=query_rng(7, "q1"))
        b = choose(scores, 4, strategy, pool=10, temperature=0.05, rng=query_rng(7, "q1"))
        assert a.tolist() == b.tolist()  # same seed and query: same draw
        assert len(set(a.tolist())) == 4 and a.max() < 10 and list(a) == sorted(a)
        draws = {tuple(choose(scores, 4, strategy, pool=10, temperature=0.05, rng=query_rng(s, "q1")))
                 for s in range(30)}
        assert len(draws) > 3  # different seeds differ
    assert all(choose(scores, 4, "top1+", pool=10, rng=query_rng(s, "x"))[0] == 0 for s in range(20))
    # a pool no larger than k is taken whole
    assert choose(scores, 4, "uniform", pool=3, rng=query_rng(0, "q")).tolist() == [0, 1, 2]
    # a cold softmax almost always takes the best ones; a hot one spreads out
    cold = [choose(scores, 2, "softmax", pool=10, temperature=1e-4, rng=query_rng(s, "q")).tolist()
            for s in range(20)]
    assert all(c == [0, 1] for c in cold)
    hot = np.mean([choose(scores, 2, "softmax", pool=10, temperature=100, rng=query_rng(s, "q")).mean()
                   for s in range(200)])
    assert 3.5 < hot < 5.5  # uniform over 0..9 has mean 4.5


def test_sampling_leaves_global_random_state_alone():
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    choose(np.linspace(1, 0, 30), 4, "softmax", pool=20, rng=query_rng(1, "a"))
    assert np.random.random() == before


# ---------------------------------------------------------------------------- the miner core


def _world(n_docs=400, n_q=12, dim=24, seed=0):
    rng = np.random.default_rng(seed)
    d = rng.standard_normal((n_docs, dim)).astype(np.float32)
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    q = rng.standard_normal((n_q, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    items = []
    for i in range(n_q):
        s = d @ q[i]
        order = np.argsort(-s)
        # positives: one near the top, one in the middle (the lowest one decides the thresholds)
        pos = [int(order[3 + i % 5]), int(order[40 + 7 * i])]
        items.append(MineItem(key=f"q{i}", query=f"query {i}", positives=pos, record_id=f"r{i}",
                              exclude=np.array(sorted(pos), dtype=np.int64)))
    return q, d, items


def _reference(q, d, item, method: Method, k):
    """Brute force: every document scored, sorted, positives dropped, then the method by hand."""
    s = d @ q
    order = [int(j) for j in np.argsort(-s, kind="stable") if j not in set(item.positives)]
    low = min(float(s[p]) for p in item.positives)
    out = []
    for r, j in enumerate(order, 1):
        x = float(s[j])
        if method.name == "percpos" and x > low - method.relative_margin * abs(low):
            continue
        if method.name == "marginpos" and x > low - method.absolute_margin:
            continue
        if method.name == "abs" and x > method.max_score:
            continue
        if method.name == "shift" and r <= method.shift:
            continue
        if method.name == "window" and not (method.range_min < r <= method.range_max):
            continue
        if method.min_score is not None and x < method.min_score:
            continue
        out.append(j)
    return out[:k]


@pytest.mark.parametrize("method", [
    Method.make("naive"), Method.make("shift", shift=7), Method.make("window", range_min=19, range_max=60),
    Method.make("abs", max_score=0.1), Method.make("marginpos", absolute_margin=0.05), Method.make("percpos"),
    Method.make("percpos", relative_margin=0.1, min_score=-0.2),
])
@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_mine_matches_brute_force_with_deepening(method, kind):
    q, d, items = _world()
    cfg = MineConfig(method=method, k=4, depth=5)  # a shallow first window forces deeper searches
    index = SearchIndex(d, kind, ef_search=512)  # hnsw: a search this wide finds the exact neighbours
    res = mine(q, d, index, items, cfg)
    for i, r in enumerate(res):
        want = _reference(q[i], d, items[i], method, 4)
        assert r.docs.tolist() == want, (i, method)
        assert not set(r.docs.tolist()) & set(items[i].positives)  # positives never mined
        assert r.lowest_positive == pytest.approx(min(float(d[p] @ q[i]) for p in items[i].positives))
        np.testing.assert_allclose(r.scores, d[r.docs] @ q[i], rtol=0, atol=1e-5)
        assert (r.short_reason is None) == (len(want) == 4)


def test_depth_extension_when_the_first_window_is_all_rejected():
    # 60 documents score above 0.95 x the positive; the first window of 10 holds only them
    rng = np.random.default_rng(1)
    n = 500
    target = np.concatenate([np.linspace(0.99, 0.9, 60), np.linspace(0.6, -0.5, n - 61), [0.8]])
    dim = 8
    q = np.zeros(dim, np.float32)
    q[0] = 1
    d = np.zeros((n, dim), np.float32)
    d[:, 0] = target
    d[:, 1] = np.sqrt(1 - target ** 2)
    d[:, 2:] = rng.standard_normal((n, dim - 2)) * 1e-4
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    pos = n - 1  # scores 0.8: ceiling 0.76
    item = MineItem("q", "q", [pos], "r", exclude=np.array([pos]))
    cfg = MineConfig(method=Method.make("percpos"), k=4, depth=10)
    (r,) = mine(q[None], d, SearchIndex(d), [item], cfg)
    assert len(r.docs) == 4 and r.rounds >= 4 and r.depth > 60
    assert r.docs.tolist() == [60, 61, 62, 63]
    assert all(s <= 0.76 for s in r.scores)
    assert r.rejected["above_threshold"] == 60
    # naive takes the very top at once
    (n0,) = mine(q[None], d, SearchIndex(d), [item], MineConfig(method=Method.make("naive"), k=4, depth=10))
    assert n0.docs.tolist() == [0, 1, 2, 3] and n0.rounds == 1
    # a max depth stops the search: too few, and the report says why
    (capped,) = mine(q[None], d, SearchIndex(d), [item],
                     MineConfig(method=Method.make("percpos"), k=4, depth=10, max_depth=40))
    assert len(capped.docs) == 0 and capped.short_reason == "positive scores below every candidate"
    # a floor: deeper documents are all below it, so the search stops early
    (fl,) = mine(q[None], d, SearchIndex(d), [item],
                 MineConfig(method=Method.make("percpos", min_score=0.5999), k=4, depth=10))
    assert fl.docs.tolist() == [60] and fl.short_reason == "not enough candidates above the floor"
    assert fl.depth < n


def test_lowest_positive_sets_the_threshold():
    q = np.array([[1, 0, 0, 0]], np.float32)

    def doc(s):
        return [s, math.sqrt(1 - s * s), 0, 0]

    scores = [0.9, 0.7, 0.8, 0.75, 0.66, 0.6, 0.5, 0.3]
    d = np.array([doc(s) for s in scores], np.float32)
    item = MineItem("q", "q", [0, 1], "r", exclude=np.array([0, 1]))  # positives 0.9 and 0.7
    (r,) = mine(q, d, SearchIndex(d), [item], MineConfig(method=Method.make("percpos"), k=3))
    assert r.lowest_positive == pytest.approx(0.7)
    assert r.docs.tolist() == [4, 5, 6]  # ceiling 0.95 x 0.7 = 0.665 (0.9 would have let 0.8 and 0.75 in)
    assert r.positive_scores.tolist() == pytest.approx([0.9, 0.7])
    # anchored on the record's own positive (0.9): ceiling 0.855, so 0.8 and 0.75 are hard negatives
    (a,) = mine(q, d, SearchIndex(d), [item], MineConfig(method=Method.make("percpos"), k=3, anchor="record"))
    assert a.docs.tolist() == [2, 3, 4]
    assert a.lowest_positive == pytest.approx(0.7)  # still reported


def test_sampling_in_the_miner_is_deterministic_per_query():
    q, d, items = _world(n_q=6)
    cfg = MineConfig(method=Method.make("percpos"), k=3, sample="softmax", pool=12, temperature=0.02, seed=5)
    a = [r.docs.tolist() for r in mine(q, d, SearchIndex(d), items, cfg)]
    # other order, other chunking: the same draws
    perm = [5, 3, 1, 0, 2, 4]
    cfg_small = MineConfig(**{**cfg.__dict__, "max_cells": 50})
    b = mine(q[perm], d, SearchIndex(d), [items[i] for i in perm], cfg_small)
    assert [b[perm.index(i)].docs.tolist() for i in range(6)] == a
    c = [r.docs.tolist() for r in mine(q, d, SearchIndex(d), items, MineConfig(**{**cfg.__dict__, "seed": 6}))]
    assert c != a


def test_ivf_index_and_cross_encoder_stub():
    q, d, items = _world(n_docs=600)
    res = mine(q, d, SearchIndex(d, "ivf", nprobe=64), items, MineConfig(method=Method.make("naive"), k=4))
    exact = mine(q, d, SearchIndex(d), items, MineConfig(method=Method.make("naive"), k=4))
    assert [r.docs.tolist() for r in res] == [r.docs.tolist() for r in exact]  # nprobe = every list

    class Stub:
        """A cross-encoder stand-in: prefers documents with a high index, scores in logits."""
        name = "stub-ce"

        def __init__(self):
            self.calls = []

        def score(self, query, docs):
            self.calls.append(len(docs))
            return np.array([float(j) / 100.0 - 3.0 for j in docs])

    stub = Stub()
    item = items[0]
    r = mine(q[:1], d, SearchIndex(d), [item], MineConfig(method=Method.make("percpos"), k=4, depth=50),
             rescorer=stub)[0]
    low = min(float(j) / 100 - 3 for j in item.positives)  # the stub's positive scores are used
    assert r.lowest_positive == pytest.approx(low)
    ceiling = low - 0.05 * abs(low)
    assert all(s <= ceiling + 1e-12 for s in r.scores)
    assert list(r.scores) == sorted(r.scores, reverse=True)  # re-sorted by the rescorer
    assert not set(r.docs.tolist()) & set(item.positives)


# ---------------------------------------------------------------------------- ensembles


def test_interleave_and_cross_assignment():
    a = [Pick(0, d, 1.0 - i / 10, i + 1) for i, d in enumerate([1, 2, 3, 4])]
    b = [Pick(1, d, 0.9 - i / 10, i + 1) for i, d in enumerate([1, 5, 2, 6])]
    assert [p.doc for p in interleave([a, b], 4, dedup=False)] == [1, 1, 2, 5]
    assert [p.doc for p in interleave([a, b], 4, dedup=True)] == [1, 5, 2, 6]
    assert [p.teacher for p in interleave([a, b], 4, dedup=True)] == [0, 1, 0, 1]
    assert [p.doc for p in interleave([a[:1], b], 4, dedup=True)] == [1, 5, 2, 6]
    assert [p.doc for p in interleave([a[:1], []], 4, dedup=False)] == [1]
    keys = [f"q{i}" for i in range(300)]
    h = assign_cross(keys, 3, seed=0)
    assert h == assign_cross(list(reversed(keys)), 3, seed=0)[::-1]  # order-independent
    assert set(h) == {0, 1, 2} and min(h.count(t) for t in range(3)) > 70
    assert assign_cross(keys[:5], 2, how="roundrobin") == [0, 1, 0, 1, 0]


def _pairs_world(tmp_path, n_docs=120):
    corpus = [{"_id": f"d{i}", "text": f"document number {i}"} for i in range(n_docs)]
    write_jsonl(tmp_path / "corpus.jsonl", corpus)
    pairs = [{"query": f"question {i}", "positive": f"document number {i}", "query_id": f"q{i}"}
             for i in range(10)]
    pairs.append({"query": "question 0", "positive": "document number 50", "query_id": "q0"})
    write_jsonl(tmp_path / "pairs.jsonl", pairs)
    return tmp_path / "pairs.jsonl", tmp_path / "corpus.jsonl"


def test_run_mine_ensembles(tmp_path):
    pairs, corpus = _pairs_world(tmp_path)
    t1, t2 = HashTeacher("t1"), HashTeacher("t2")

    def run(name, **kw):
        opts = MineOptions(positive_top=0, out=str(tmp_path / name), pairs=str(pairs), corpus=str(corpus), method="naive", k=4,
                           plots=False, **kw)
        run_mine(opts, teachers=kw.pop("teachers", None) or [t1, t2])
        return [json.loads(x) for x in (tmp_path / name / "mined.jsonl").read_text().splitlines()]

    single1 = run("s1", teachers=[HashTeacher("t1")])
    single2 = run("s2", teachers=[HashTeacher("t2")])
    intra = run("intra", ensemble="intra")
    for r, a, b in zip(intra, single1, single2):
        ta = [n["text"] for n in a["negatives"]]
        tb = [n["text"] for n in b["negatives"]]
        assert [n["text"] for n in r["negatives"]] == [ta[0], tb[0], ta[1], tb[1]]
        assert [n["mined_by"] for n in r["negatives"]] == ["t1", "t2", "t1", "t2"]
        assert r["teacher"]["model"] == "intra:t1+t2"
    cross = run("cross", ensemble="cross")
    owners = assign_cross([r["meta"]["query_id"] for r in single1], 2, 0)
    for r, a, b, o in zip(cross, single1, single2, owners):
        assert [{**n, "mined_by": None} for n in r["negatives"]] == [{**n, "mined_by": None} for n in (a, b)[o]["negatives"]]
        assert [n["mined_by"] for n in r["negatives"]] == [f"t{o + 1}"] * 4
    # the same teacher twice: no-dedup repeats each negative, dedup gives the next ones
    same = [HashTeacher("t1"), HashTeacher("t1b")]
    same[1]._vec = same[0]._vec
    nd = run("nd", ensemble="intra", teachers=same)
    dd = run("dd", ensemble="intra", ensemble_dedup=True, teachers=same)
    for r_nd, r_dd, a in zip(nd, dd, single1):
        ta = [n["text"] for n in a["negatives"]]
        assert [n["text"] for n in r_nd["negatives"]] == [ta[0], ta[0], ta[1], ta[1]]
        assert [n["text"] for n in r_dd["negatives"]] == ta
    with pytest.raises(CurateError, match="--ensemble"):
        run("none")


def test_run_mine_pairs_outputs_and_positives(tmp_path):
    pairs, corpus = _pairs_world(tmp_path)
    rep = run_mine(MineOptions(positive_top=0, out=str(tmp_path / "o"), pairs=str(pairs), corpus=str(corpus), method="naive",
                               k=5, levels=True), teachers=[HashTeacher()])
    recs = [json.loads(x) for x in (tmp_path / "o" / "mined.jsonl").read_text().splitlines()]
    assert rep["queries_in"] == 10 and rep["queries_out"] == 10 and rep["negatives"] == 50
    q0 = recs[0]
    assert q0["query"] == "question 0" and q0["positive"] == "document number 0"
    assert [p["text"] for p in q0["positives"]] == ["document number 50"]
    assert [q0["positive_id"], *(p["doc_id"] for p in q0["positives"])] == ["d0", "d50"]
    texts = [n["text"] for n in q0["negatives"]]
    assert "document number 0" not in texts and "document number 50" not in texts
    assert [n["level"] for n in q0["negatives"]] == [1, 1, 2, 3, 4]
    assert all(n["source"] == "mined" and n["teacher_score"] is not None for n in q0["negatives"])
    t = q0["teacher"]
    assert t["model"] == "hash-teacher" and t["positive"] == min(t["positives"]) and len(t["positives"]) == 2
    assert q0["task"] == "Given a query, retrieve relevant documents." and q0["task_type"] == "retrieval"
    ranks = [n["mine_rank"] for n in q0["negatives"]]  # each negative carries its rank in mine's search
    assert len(ranks) == 5 and ranks == sorted(ranks) and ranks[0] >= 1 and q0["negatives"][0]["doc_id"].startswith("d")
    assert "ranks" not in q0["meta"]["mine"] and "doc_ids" not in q0["meta"]["mine"]
    assert (tmp_path / "o" / "report.json").exists() and (tmp_path / "o" / "mine_scores.png").exists()


@pytest.mark.parametrize("method, old, new, line", [
    ("percpos", {"margin": 0.9}, {"relative_margin": 0.1}, "--margin is deprecated: use --relative-margin 0.1"),
    ("marginpos", {"margin": 0.2}, {"absolute_margin": 0.2}, "--margin is deprecated: use --absolute-margin 0.2"),
    ("window", {"rank_min": 4}, {"range_min": 3}, "--rank-min is deprecated: use --range-min 3"),
    ("window", {"rank_max": 40}, {"range_max": 40}, "--rank-max is deprecated: use --range-max 40"),
])
def test_a_deprecated_knob_name_still_mines_the_same_records(tmp_path, capsys, method, old, new, line):
    """margin, rank_min and rank_max, the names before sentence-transformers' were taken: the same
    thresholds and the very same records, with one line on stderr saying what to write instead."""
    assert Method.make(method, **old).thresholds == Method.make(method, **new).thresholds
    capsys.readouterr()
    pairs, corpus = _pairs_world(tmp_path)
    base = dict(positive_top=0, pairs=str(pairs), corpus=str(corpus), method=method, k=3, plots=False)
    reports = {}
    for name, knobs in (("old", old), ("new", new)):
        reports[name] = run_mine(MineOptions(out=str(tmp_path / name), **base, **knobs), teachers=[HashTeacher()])
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == (name == "old") and all(ln.startswith(f"curate: {line} (") for ln in err), err
    assert (tmp_path / "old" / "mined.jsonl").read_bytes() == (tmp_path / "new" / "mined.jsonl").read_bytes()
    assert reports["old"]["method"] == reports["new"]["method"] == {"name": method, **Method.make(method, **new).params()}
    assert reports["old"]["negatives"] > 0


def test_the_old_defaults_are_the_new_ones():
    """percpos's share 0.95 is relative_margin 0.05 and window's ranks 30..100 are range_min 29,
    range_max 100: the same floats and ranks as before the rename."""
    share = Method.make("percpos").thresholds
    assert share.percent == 0.95 and round(1.0 - share.percent, 12) == 0.05
    assert Method.make("window").thresholds.rank_min == 30 and Method.make("window").thresholds.rank_max == 100
    for pos in np.linspace(-1, 1, 2001):
        assert Method.make("percpos").ceiling(pos) == pos - round(1.0 - 0.95, 12) * abs(pos)


def test_run_mine_records_keeps_generated_negatives(tmp_path):
    _, corpus = _pairs_world(tmp_path)
    recs = [Record(id="r1", task_type="short-long", task="Find it.", query="question 3",
                   positive="document number 3",
                   negatives=[Negative(text="an llm negative", level=1, score=6),
                              Negative(text="document number 7", level=2)],
                   meta={"positives": ["document number 8"], "query_id": "q3"}),
            Record(id="r2", task_type="sts", task="Same meaning?", query="question 4",
                   positive="a positive outside the corpus")]
    write_jsonl(tmp_path / "recs.jsonl", (r.to_dict() for r in recs))
    teacher = HashTeacher()
    rep = run_mine(MineOptions(positive_top=0, out=str(tmp_path / "o"), records=str(tmp_path / "recs.jsonl"), corpus=str(corpus),
                               method="naive", k=3), teachers=[teacher])
    out = [json.loads(x) for x in (tmp_path / "o" / "mined.jsonl").read_text().splitlines()]
    assert [r["id"] for r in out] == ["r1", "r2"] and rep["min_negatives"] == 0
    r1 = out[0]
    assert r1["task_type"] == "short-long" and r1["task"] == "Find it."
    assert [n["source"] for n in r1["negatives"]] == ["llm", "llm", "mined", "mined", "mined"]
    assert r1["negatives"][0] == {"text": "an llm negative", "level": 1, "score": 6, "answerable": None,
                                  "teacher_score": None, "source": "llm", "doc_id": None}
    mined = [n["text"] for n in r1["negatives"][2:]]
    # each mined negative carries its corpus id and its rank in mine's search
    assert all(n["doc_id"] and n["mine_rank"] >= 1 for n in r1["negatives"][2:])
    # neither positive, nor a negative the record already has, is mined again
    assert not {"document number 3", "document number 8", "document number 7"} & set(mined)
    assert out[1]["task_type"] == "sts" and len(out[1]["negatives"]) == 3


def test_fn_rate_counts_relevant_negatives():
    corpus = Corpus()
    for i in range(6):
        corpus.add(f"t{i}", f"d{i}")
    corpus.add("t0", "d0-copy")  # the same text under another id
    items = [MineItem("a", "qa", [5], "ra", query_id="a"), MineItem("b", "qb", [5], "rb", query_id="b"),
             MineItem("c", "qc", [5], "rc", query_id="zz")]
    negs = [[0, 1, 2], [3, 4], [1]]
    qrels = {"a": {"d0-copy": 1, "d2": 0, "d9": 2}, "b": {"d3": 2, "d4": 1}}
    fn = false_negative_rate(items, negs, corpus, qrels, "x.tsv")
    assert fn["queries_checked"] == 2 and fn["queries_not_in_qrels"] == 1
    assert fn["negatives_checked"] == 5 and fn["false_negatives"] == 3 and fn["rate"] == 0.6
    assert fn["queries_with_a_false_negative"] == 2
    assert fn["rate_by_position"] == {"1": 1.0, "2": 0.5, "3": 0.0}


# ---------------------------------------------------------------------------- inputs and errors


def test_corpus_dedup_and_query_self_exclusion(tmp_path):
    write_jsonl(tmp_path / "c.jsonl", [{"_id": "a", "text": "same"}, {"_id": "b", "text": "same"},
                                       {"_id": "c", "text": "is this the query"}, {"_id": "d", "text": "other"}])
    write_jsonl(tmp_path / "p.jsonl", [{"query": "is this the query", "positive": "other"},
                                       {"query": "q2", "positive": ["same", "new positive"]}])
    inp = load_pairs_input(tmp_path / "p.jsonl", tmp_path / "c.jsonl")
    c = inp.corpus
    assert len(c) == 4 and c.ids[0] == ["a", "b"] and c.duplicates == 1 and c.added == 1
    assert inp.items[0].exclude.tolist() == [1, 2]  # its positive and the document equal to the query
    assert inp.items[1].exclude.tolist() == [0, 3]


def test_same_query_text_shares_positives_across_records(tmp_path):
    recs = [Record(id=f"r{i}", task_type="x", task="t", query="same query", positive=f"p{i}") for i in range(2)]
    write_jsonl(tmp_path / "r.jsonl", (r.to_dict() for r in recs))
    inp = load_records_input(tmp_path / "r.jsonl")
    assert inp.items[0].exclude.tolist() == inp.items[1].exclude.tolist() == [0, 1]
    assert isinstance(inp, MineInput)
    finalize(inp)  # idempotent


def test_passages_of_the_document_a_query_was_written_from_are_never_mined(tmp_path):
    """`generate --from-corpus` records: the other passages of the positive's document (ids DOC#k)
    overlap it by the chunker's overlap and share its subject, so none is a negative."""
    corpus = [{"_id": f"guide#{k}", "text": f"install the pump part {k} then the valve"} for k in range(3)]
    corpus += [{"_id": "notes#0", "text": "install the pump quickly"}, {"_id": "other#0", "text": "a recipe for bread"},
               {"_id": "guide#x", "text": "install the pump appendix"}]  # not a passage id: an ordinary document
    write_jsonl(tmp_path / "c.jsonl", corpus)
    rec = Record(id="r", task_type="from-corpus", task="t", query="how do I install the pump",
                 positive=corpus[1]["text"], positive_id="guide#1",
                 meta={"passage": {"id": "guide#1", "doc_id": "guide", "source": "guide.md", "k": 1}})
    plain = Record(id="s", task_type="x", task="t", query="pump install", positive="a recipe for bread")
    write_jsonl(tmp_path / "r.jsonl", [rec.to_dict(), plain.to_dict()])
    inp = load_records_input(tmp_path / "r.jsonl", tmp_path / "c.jsonl")
    ids = lambda idxs: sorted(inp.corpus.ids[i][0] for i in idxs)  # noqa: E731
    assert ids(inp.items[0].exclude) == ["guide#0", "guide#1", "guide#2"]
    assert ids(inp.items[1].exclude) == ["other#0"]  # a record without meta.passage: only its positive
    assert inp.items[0].also_positive == []  # excluded, not counted as positives for the thresholds
    run_mine(MineOptions(out=str(tmp_path / "o"), records=str(tmp_path / "r.jsonl"),
                               corpus=str(tmp_path / "c.jsonl"), method="naive", k=3, plots=False),
                   teachers=[HashTeacher()])
    mined = [json.loads(line) for line in (tmp_path / "o" / "mined.jsonl").read_text().splitlines()]
    first = next(r for r in mined if r["id"] == "r")
    assert {n["doc_id"] for n in first["negatives"]} == {"notes#0", "other#0", "guide#x"}


@pytest.mark.parametrize("lines, message", [
    (['{"query": "a", "positive": "b"}', '{"query": "a"}'], r"p\.jsonl:2: 'positive' must be"),
    (['{"query": "a", "positive": "b"}', "", '{"query": 3, "positive": "b"}'], r"p\.jsonl:3: 'query' must be"),
    (['{"query": "a", "positive": []}'], r"p\.jsonl:1: 'positive' must be"),
    (['{"query": "a", "positive": "b"}', "{not json"], r"p\.jsonl:2: invalid JSON"),
    (['["a", "b"]'], r"p\.jsonl:1: expected an object"),
])
def test_bad_pairs_are_one_line_errors(tmp_path, lines, message):
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(CurateError, match=message) as e:
        load_pairs_input(tmp_path / "p.jsonl")
    assert "\n" not in str(e.value)


def test_bad_corpus_records_and_options(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"query": "a", "positive": "b"}\n')
    (tmp_path / "c.jsonl").write_text('{"_id": "1", "text": "x"}\n{"_id": "2"}\n')
    with pytest.raises(CurateError, match=r"c\.jsonl:2: a corpus line needs a string 'text'"):
        load_pairs_input(tmp_path / "p.jsonl", tmp_path / "c.jsonl")
    (tmp_path / "r.jsonl").write_text('{"id": "1", "task_type": "x", "task": "t", "query": "q"}\n')
    with pytest.raises(CurateError, match=r"r\.jsonl:1: not a curate record: record lacks positive"):
        load_records_input(tmp_path / "r.jsonl")
    base = dict(out=str(tmp_path / "o"), plots=False)
    for kw, msg in ((dict(), "exactly one of"), (dict(pairs="a", records="b"), "exactly one of"),
                    (dict(pairs=str(tmp_path / "p.jsonl"), k=0), "--num-negatives 0: must be at least 1"),
                    (dict(pairs=str(tmp_path / "p.jsonl"), method="naive", margin=0.9), "--margin applies"),
                    (dict(pairs=str(tmp_path / "p.jsonl"), method="naive", relative_margin=0.1),
                     "--relative-margin applies to percpos, not naive"),
                    (dict(pairs=str(tmp_path / "p.jsonl"), margin=0.9, relative_margin=0.1),
                     "--margin and --relative-margin are the same setting"),
                    (dict(pairs=str(tmp_path / "missing.jsonl")), "missing.jsonl: no such file"),
                    (dict(data=str(tmp_path)), "not a BEIR folder"),
                    (dict(pairs=str(tmp_path / "p.jsonl"), qrels="x"), "--qrels goes with --data")):
        with pytest.raises(CurateError, match=msg):
            run_mine(MineOptions(**base, **kw), teachers=[HashTeacher()])


def test_cross_encoder_scorer_remembers_pairs():
    from curate.mine.miner import CrossEncoderScorer

    class Model:
        calls: list[int] = []

        def predict(self, pairs, batch_size=32, show_progress_bar=False):
            self.calls.append(len(pairs))
            return np.array([len(q) + len(d) for q, d in pairs], dtype=np.float32)

    model = Model()
    scorer = CrossEncoderScorer(model, ["a", "bb", "ccc"], name="stub")
    assert scorer.score("q", [2, 0]).tolist() == [4.0, 2.0]
    assert scorer.score("q", [0, 1, 2]).tolist() == [2.0, 3.0, 4.0]
    assert model.calls == [2, 1] and scorer.pairs_scored == 3


def test_run_mine_with_a_rescorer_records_its_scores(tmp_path):
    pairs, corpus = _pairs_world(tmp_path)

    class Stub:
        name = "stub-ce"
        pairs_scored = 0

        def score(self, query, docs):
            return np.array([-float(j) for j in docs])  # logits below zero: the |pos| rule matters

    rep = run_mine(MineOptions(positive_top=0, out=str(tmp_path / "o"), pairs=str(pairs), corpus=str(corpus), k=2, depth=20),
                   teachers=[HashTeacher()], rescorer=Stub())
    assert rep["cross_encoder"]["model"] == "stub-ce"
    for rec in (json.loads(x) for x in (tmp_path / "o" / "mined.jsonl").read_text().splitlines()):
        t = rec["teacher"]
        assert t["model"] == "stub-ce" and t["retriever"] == "hash-teacher"
        ceiling = t["positive"] - 0.05 * abs(t["positive"])
        assert all(n["teacher_score"] <= ceiling for n in rec["negatives"])


def test_hf_datasets_from_disk_and_local_files(tmp_path):
    datasets = pytest.importorskip("datasets")
    pairs, corpus = _pairs_world(tmp_path)
    rows = [json.loads(x) for x in pairs.read_text().splitlines()]
    teacher = HashTeacher()
    run_mine(MineOptions(positive_top=0, out=str(tmp_path / "ref"), pairs=str(pairs), corpus=str(corpus), method="naive"),
             teachers=[teacher])
    ref = (tmp_path / "ref" / "mined.jsonl").read_text()

    ds = datasets.Dataset.from_dict({"anchor": [r["query"] for r in rows], "pos": [r["positive"] for r in rows],
                                     "qid": [r["query_id"] for r in rows]})
    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "saved"))
    run_mine(MineOptions(positive_top=0, out=str(tmp_path / "hf1"), hf=str(tmp_path / "saved"), id_column="qid",
                         corpus=str(corpus), method="naive"), teachers=[teacher])
    got = [json.loads(x) for x in (tmp_path / "hf1" / "mined.jsonl").read_text().splitlines()]
    want = [json.loads(x) for x in ref.splitlines()]
    for g, w in zip(got, want):
        assert g["negatives"] == w["negatives"] and g["meta"]["query_id"] == w["meta"]["query_id"]
        assert g["meta"]["source"] == "hf"
    assert len(got) == len(want)

    # a local JSONL file, named columns, positives as lists
    write_jsonl(tmp_path / "rows.jsonl", ({"x": 1, "q": r["query"], "p": [r["positive"]]} for r in rows))
    run_mine(MineOptions(positive_top=0, out=str(tmp_path / "hf2"), hf=str(tmp_path / "rows.jsonl"), query_column="q",
                         positive_column="p", corpus=str(corpus), method="naive"), teachers=[teacher])
    got2 = [json.loads(x)["negatives"] for x in (tmp_path / "hf2" / "mined.jsonl").read_text().splitlines()]
    assert got2 == [w["negatives"] for w in want]
    with pytest.raises(CurateError, match="no column 'nope'"):
        run_mine(MineOptions(positive_top=0, out=str(tmp_path / "hf3"), hf=str(tmp_path / "saved"), query_column="nope"),
                 teachers=[teacher])
    with pytest.raises(CurateError, match="no split 'test'"):
        run_mine(MineOptions(positive_top=0, out=str(tmp_path / "hf3"), hf=str(tmp_path / "saved"), hf_split="test"),
                 teachers=[teacher])


def test_cli_bad_input_is_one_line(tmp_path):
    from tests.helpers import run_curate

    (tmp_path / "p.jsonl").write_text('{"query": "a", "positive": "b"}\n{"query": "c", "positive": 5}\n')
    proc = run_curate("mine", "--pairs", str(tmp_path / "p.jsonl"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"curate: error: {tmp_path / 'p.jsonl'}:2: 'positive' must be a non-empty string or a list of them"]
    proc = run_curate("mine", "--pairs", str(tmp_path / "p.jsonl"), "--teacher", "a", "--teacher", "b",
                      "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "--ensemble" in proc.stderr


def test_positive_gate_drops_queries_whose_positive_the_teacher_ranks_low(tmp_path):
    """--positive-top R keeps a query only when at most R-1 documents (not known positives)
    outscore its own positive; BEIR positives come most relevant first."""
    from tests.mine_helpers import write_beir

    e = np.eye(8)
    vec = {"q-easy": e[0], "q-hard": e[1],
           "pos-easy": e[0], "pos-hard": 0.5 * e[1] + e[2],  # cos 0.45 with q-hard
           "weak-easy": 0.2 * e[0] + e[3],  # a relevance-1 positive of q-easy, listed first in qrels
           "d1": 0.9 * e[1] + 0.3 * e[4], "d2": 0.8 * e[1] + 0.5 * e[5],  # both outscore pos-hard
           "d3": 0.3 * e[0] + e[6], "d4": e[7]}
    corpus = {k: k for k in vec if not k.startswith("q-")}
    folder = write_beir(tmp_path / "b", corpus, {"qe": "q-easy", "qh": "q-hard"},
                        {"qe": {"weak-easy": 1, "pos-easy": 2}, "qh": {"pos-hard": 1}})
    teacher = HashTeacher(overrides=vec)

    def run(name, top):
        rep = run_mine(MineOptions(out=str(tmp_path / name), data=str(folder), method="naive", k=2,
                                   positive_top=top, plots=False), teachers=[teacher])
        recs = [json.loads(x) for x in (tmp_path / name / "mined.jsonl").read_text().splitlines()]
        return rep, {r["meta"]["query_id"]: r for r in recs}

    rep, recs = run("open", None)
    assert set(recs) == {"qe", "qh"} and rep["positive_gate"]["queries_dropped"] == 0
    assert recs["qe"]["positive"] == "pos-easy"  # relevance 2 before the relevance-1 line above it
    assert recs["qe"]["teacher"]["positive_rank"] == 1
    assert recs["qh"]["teacher"]["positive_rank"] == 3  # d1 and d2 score higher
    rep, recs = run("gated", 2)
    assert set(recs) == {"qe"}
    assert rep["positive_gate"] == {"positive_top": 2, "queries_dropped": 1,
                                    "positive_rank": rep["positive_gate"]["positive_rank"]}
    assert rep["positive_gate"]["positive_rank"]["top1"] == 1
    _, recs = run("wide", 3)
    assert set(recs) == {"qe", "qh"}
    rep, recs = run("off", 0)  # 0: no gate
    assert set(recs) == {"qe", "qh"} and rep["positive_gate"]["positive_top"] is None
    with pytest.raises(CurateError, match="positive-top"):
        run("bad", -1)


def test_positive_choice_teacher_picks_among_equally_relevant_positives(tmp_path):
    from tests.mine_helpers import write_beir

    e = np.eye(6)
    vec = {"q": e[0], "loose": 0.1 * e[0] + e[1], "close": 0.9 * e[0] + 0.2 * e[2], "graded": 0.5 * e[0] + e[3],
           "d1": 0.3 * e[0] + e[4], "d2": e[5]}
    corpus = {k: k for k in vec if k != "q"}
    folder = write_beir(tmp_path / "b", corpus, {"q1": "q", "q2": "q"},
                        {"q1": {"loose": 1, "close": 1}, "q2": {"loose": 2, "close": 1}})
    # q1: two positives of equal relevance; q2: the more relevant one stays first whatever the teacher says
    teacher = HashTeacher(overrides=vec)

    def positives(choice):
        run_mine(MineOptions(out=str(tmp_path / choice), data=str(folder), method="naive", k=1, positive_top=0,
                             positive_choice=choice, plots=False), teachers=[teacher])
        recs = [json.loads(x) for x in (tmp_path / choice / "mined.jsonl").read_text().splitlines()]
        return {r["meta"]["query_id"]: (r["positive"], [r["positive_id"], *(p["doc_id"] for p in r["positives"])], r["teacher"])
                for r in recs}

    first, chosen = positives("first"), positives("teacher")
    assert first["q1"][0] == "loose" and chosen["q1"][0] == "close"
    assert chosen["q1"][1] == ["close", "loose"]  # ids follow the new order
    t = chosen["q1"][2]
    assert t["positives"][0] > t["positives"][1] and t["positive"] == min(t["positives"])
    assert first["q2"][0] == chosen["q2"][0] == "loose"
    with pytest.raises(CurateError, match="positive-choice"):
        positives("best")


def test_blank_texts_in_a_beir_folder_never_reach_a_record(tmp_path):
    """A record needs text on both sides and in every negative (records.py checks it on read):
    an empty query or positive is skipped and counted, an empty document is never mined."""
    from curate.core.records import read_records

    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    docs = {"d1": "alpha beta", "d2": "", "d3": "gamma delta", "d4": "eps zeta", "d5": "eta theta"}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": "", "text": v}) + "\n"
                                                 for k, v in docs.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n"
                                                  for k, v in {"q1": "alpha?", "q2": "  ", "q3": "what?"}.items()))
    (folder / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\nq3\td2\t1\n")
    rep = run_mine(MineOptions(out=str(tmp_path / "o"), data=str(folder), method="naive", k=4, plots=False),
                   teachers=[HashTeacher()])
    assert rep["skipped_input"] == {"query text is empty": 1, "positive text is empty (positive dropped)": 1,
                                    "no positive with relevance >= 1": 1}
    (rec,) = read_records(tmp_path / "o" / "mined.jsonl")  # readable by the next stage
    assert sorted(n.text for n in rec.negatives) == ["eps zeta", "eta theta", "gamma delta"]
