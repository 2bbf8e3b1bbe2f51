"""`curate convert`: classification/clustering examples and STS pairs as records (NV-Embed 4.2)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from curate.convert.labeled import examples_to_triplets
from curate.convert.nearest import pick_nearest
from curate.convert.readers import read_labeled, read_sts_pairs
from curate.convert.sts import sts_pairs_to_records, to_ten
from curate.core.errors import CurateError
from curate.core.records import Record
from tests.helpers import assert_one_line_error, SHARED_DATA, read_jsonl, run_curate

NEWS = [
    ("The striker scored twice in the second half.", "sport"),
    ("The goalkeeper saved a late penalty kick.", "sport"),
    ("The marathon was won in record time.", "sport"),
    ("The tennis final went to five sets.", "sport"),
    ("Interest rates rose by a quarter point.", "finance"),
    ("The central bank held rates steady.", "finance"),
    ("Shares fell after the earnings report.", "finance"),
    ("Bond yields climbed to a ten-year high.", "finance"),
    ("Heavy rain is expected tomorrow morning.", "weather"),
    ("A heatwave will last through the weekend.", "weather"),
    ("Snow closed the mountain pass overnight.", "weather"),
    ("Strong winds knocked down power lines.", "weather"),
    ("A lone sentence whose label nobody else has.", "misc"),  # no positive: skipped
    ("The central bank held rates steady.", "finance"),  # a duplicate text, same label
    ("Rain delayed the cricket match by an hour.", "sport"),  # also labelled weather below
    ("Rain delayed the cricket match by an hour.", "weather"),
]

STS = [
    ("A man is playing a guitar.", "A man plays the guitar.", 4.8),
    ("A woman is slicing an onion.", "A woman cuts an onion.", 4.2),
    ("A dog runs across the field.", "A cat sleeps on the sofa.", 0.4),
    ("A man is playing a guitar.", "A man is playing a flute.", 2.0),
    ("Kids are swimming in a pool.", "Children swim in a pool.", 4.6),
    ("The stock market fell sharply.", "Stocks dropped a lot today.", 3.9),
    ("A plane is taking off.", "An airplane departs.", 4.0),
    ("Two men are fighting.", "Two men are fighting.", 5.0),  # identical: no use as a pair
    ("A man plays the guitar.", "Someone is strumming a guitar.", 4.4),  # a second paraphrase
]


def _labels_of(texts, labels):
    out: dict[str, set] = {}
    for t, lab in zip(texts, labels):
        out.setdefault(t, set()).add(lab)
    return out


def check_label_structure(records, texts, labels, n_negatives=4):
    """Positive: same label, other text; negatives: other labels only, never the query/positive."""
    labels_of = _labels_of(texts, labels)
    for r in records:
        label = r.meta["label"]
        assert labels[r.meta["index"]] == label and texts[r.meta["index"]] == r.query
        assert label in labels_of[r.positive], "the positive shares the query's label"
        assert r.positive != r.query, "a query is never its own positive"
        negs = [n.text for n in r.negatives]
        assert 1 <= len(negs) <= n_negatives
        assert len(set(negs)) == len(negs), "no negative twice"
        for t in negs:
            assert t != r.query and t != r.positive
            assert label not in labels_of[t], f"negative {t!r} carries the query's label {label!r}"
        assert all(lab != label for lab in r.meta["negative_labels"])


# ---------------------------------------------------------------------------- labelled examples


def test_classification_random_negatives_follow_the_labels():
    texts, labels = zip(*NEWS)
    stats: dict = {}
    records = examples_to_triplets(texts, labels, "Classify the news topic.", seed=3, stats=stats)
    check_label_structure(records, texts, labels)
    # every example is a query once, except the one whose label has no other text
    assert sorted(r.meta["index"] for r in records) == [i for i in range(len(NEWS)) if NEWS[i][1] != "misc"]
    assert stats["skipped"] == {"no-positive": 1, "no-negative": 0}
    assert all(len(r.negatives) == 4 for r in records)
    assert all(r.task == "Classify the news topic." and r.task_type == "classification" for r in records)
    assert all(n.source == "sampled" and n.level is None for r in records for n in r.negatives)
    # the text labelled both sport and weather is a negative for neither
    both = "Rain delayed the cricket match by an hour."
    assert not any(both == n.text for r in records if r.meta["label"] in ("sport", "weather") for n in r.negatives)
    # the records round-trip through the shared schema
    assert [Record.from_dict(json.loads(json.dumps(r.to_dict()))) for r in records] == records


def test_labelled_conversion_is_deterministic_per_example():
    texts, labels = zip(*NEWS)
    a = examples_to_triplets(texts, labels, "t", seed=3)
    b = examples_to_triplets(texts, labels, "t", seed=3)
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    # an example's draws depend on itself and the seed, not on what else is in the data
    extra = [("The coach was sacked after the defeat.", "sport")]
    t2, l2 = zip(*(NEWS + extra))
    c = {r.query: r for r in examples_to_triplets(t2, l2, "t", seed=3)}
    first = a[0]
    assert c[first.query].id == first.id
    other = examples_to_triplets(texts, labels, "t", seed=4)
    assert [r.positive for r in other] != [r.positive for r in a], "the seed changes the draws"


def test_single_label_is_an_error():
    with pytest.raises(CurateError, match="two labels"):
        examples_to_triplets(["a b", "c d"], ["x", "x"], "t")


def test_few_other_label_examples_give_fewer_negatives():
    texts = ["alpha one", "alpha two", "alpha three", "beta one"]
    records = examples_to_triplets(texts, ["a", "a", "a", "b"], "t", n_negatives=4)
    assert len(records) == 3  # "beta one" has no positive
    assert all([n.text for n in r.negatives] == ["beta one"] for r in records)


def _nfcorpus_clusters(n_clusters=6):
    """Clusters from NFCorpus: the directly relevant (score 2) docs of a test query share a label."""
    from curate.datasets.beir import load_beir

    data = load_beir(SHARED_DATA / "nfcorpus", "test")
    titles = {}
    for line in (SHARED_DATA / "nfcorpus" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        titles[obj["_id"]] = obj["title"]
    groups = {q: sorted(d for d, s in docs.items() if s >= 2) for q, docs in data.qrels.items()}
    picked = [q for q in sorted(groups) if 4 <= len(groups[q]) <= 8][:n_clusters]
    texts, labels = [], []
    for q in picked:
        for d in groups[q]:
            texts.append(titles[d])
            labels.append(q)
    return texts, labels


def test_clustering_on_nfcorpus_with_the_teacher_picks_the_hardest(teacher):
    texts, labels = _nfcorpus_clusters()
    assert len(set(labels)) >= 4 and len(texts) >= 25
    records = examples_to_triplets(texts, labels, "Find abstracts on the same health topic.", seed=0,
                                   teacher=teacher, kind="clustering")
    assert len(records) == len(texts)
    check_label_structure(records, texts, labels)
    assert all(r.task_type == "clustering" for r in records)
    # brute force: the four other-label texts the teacher scores highest, hardest first
    uniq = list(dict.fromkeys(texts))
    vecs = teacher.encode_queries(uniq)
    labels_of = _labels_of(texts, labels)
    for r in records:
        q = vecs[uniq.index(r.query)]
        cands = [(float(vecs[u] @ q), t) for u, t in enumerate(uniq)
                 if r.meta["label"] not in labels_of[t] and t not in (r.query, r.positive)]
        want = [t for _, t in sorted(cands, key=lambda c: -c[0])[:4]]
        assert [n.text for n in r.negatives] == want
        assert [n.level for n in r.negatives] == [1, 2, 3, 4]
        scores = [n.teacher_score for n in r.negatives]
        assert scores == sorted(scores, reverse=True)
        assert all(n.source == "mined" for n in r.negatives)
        assert r.meta["teacher"] == teacher.model_id


def test_pick_nearest_is_exact_when_exclusions_reach_past_the_depth():
    rng = np.random.default_rng(0)
    pool = rng.standard_normal((300, 8)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    queries = pool[:20]
    banned = [set(rng.choice(300, size=120, replace=False).tolist()) | {i} for i in range(20)]

    def allowed(i, j, s):
        return j not in banned[i]

    got = pick_nearest(queries, pool, 5, allowed, depth=8)  # the depth alone cannot hold 5 allowed hits
    for i in range(20):
        row = pool @ queries[i]
        want = [j for j in np.argsort(-row, kind="stable") if j not in banned[i]][:5]
        assert [j for j, _ in got[i]] == [int(j) for j in want]
        np.testing.assert_allclose([s for _, s in got[i]], row[want], rtol=1e-5)


# ---------------------------------------------------------------------------- STS pairs


def test_sts_pairs_give_both_directions_above_the_threshold_only(teacher):
    stats: dict = {}
    records = sts_pairs_to_records(STS, min_score=4.0, scale_max=5.0, teacher=teacher, k=4, stats=stats)
    kept = [(a, b) for a, b, s in STS if s >= 4.0 and a != b]
    assert sorted((r.query, r.positive) for r in records) == sorted(kept + [(b, a) for a, b in kept])
    assert stats["below_min_score"] == 3 and stats["identical"] == 1 and stats["records"] == 2 * len(kept)
    partners = {}
    for a, b in kept:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    for r in records:
        assert r.task_type == "sts"
        negs = [n.text for n in r.negatives]
        assert negs and len(set(negs)) == len(negs)
        assert r.query not in negs and r.positive not in negs, "never the query or its partner"
        assert not set(negs) & partners[r.query], "never another paraphrase the data gives"
        assert not set(negs) & partners[r.positive], "nor a paraphrase of the positive"
        assert [n.level for n in r.negatives] == list(range(1, len(negs) + 1))
        ts = [n.teacher_score for n in r.negatives]
        assert ts == sorted(ts, reverse=True)
        assert r.positive_score == to_ten(r.meta["score"], 5.0)
    # the low-scored partner is the hardest negative, and carries the data's own score
    guitar = next(r for r in records if r.query == "A man is playing a guitar." and r.positive == "A man plays the guitar.")
    flute = guitar.negatives[0]
    assert flute.text == "A man is playing a flute." and flute.score == to_ten(2.0, 5.0)


def test_sts_threshold_and_scale():
    pairs = [("one two", "three four", 0.81), ("five six", "seven eight", 0.79), ("nine", "ten", 0.2)]
    records = sts_pairs_to_records(pairs, min_score=0.8, scale_max=1.0, teacher=None, k=2, seed=1)
    assert sorted((r.query, r.positive) for r in records) == [("one two", "three four"), ("three four", "one two")]
    for r in records:
        assert {n.text for n in r.negatives} <= {"five six", "seven eight", "nine", "ten"}
        assert len(r.negatives) == 2 and all(n.source == "sampled" for n in r.negatives)
        assert r.positive_score == to_ten(0.81, 1.0)
    # a corpus replaces the input's sentences as the pool, still never the partner
    corpus = ["three four", "an unrelated corpus text", "another corpus text"]
    records = sts_pairs_to_records(pairs, min_score=0.8, scale_max=1.0, corpus_for_negatives=corpus, k=4)
    for r in records:
        assert {n.text for n in r.negatives} <= set(corpus) - {r.query, r.positive}


def test_sts_ceiling_drops_near_paraphrases(teacher):
    pairs = [("A man is playing a guitar.", "A man plays the guitar.", 5.0),
             ("A dog barks loudly.", "A dog is barking.", 1.0)]
    corpus = ["A man is playing the guitar.", "A cat sleeps.", "Rain falls on the roof."]
    with_ceiling = sts_pairs_to_records(pairs, corpus_for_negatives=corpus, teacher=teacher, k=3, max_ratio=0.95)
    without = sts_pairs_to_records(pairs, corpus_for_negatives=corpus, teacher=teacher, k=3, max_ratio=None)
    rec = next(r for r in with_ceiling if r.query == "A man is playing a guitar.")
    assert "A man is playing the guitar." not in [n.text for n in rec.negatives]
    rec = next(r for r in without if r.query == "A man is playing a guitar.")
    assert rec.negatives[0].text == "A man is playing the guitar."


def test_sts_ceiling_stays_below_a_positive_that_scores_below_zero():
    import numpy as np

    class Fixed:  # unit vectors at chosen angles from the query: the positive scores -0.2
        model_id = "fixed"
        vecs = {"q": [1.0, 0.0], "p": [-0.2, 0.98], "closer": [-0.19, 0.98], "lower": [-0.23, 0.97],
                "far": [-0.9, 0.44]}

        def encode_queries(self, texts):
            v = np.array([self.vecs[t] for t in texts], dtype=np.float32)
            return v / np.linalg.norm(v, axis=1, keepdims=True)

    recs = sts_pairs_to_records([("q", "p", 5.0)], corpus_for_negatives=["closer", "lower", "far"],
                                teacher=Fixed(), k=3, max_ratio=0.95)
    rec = next(r for r in recs if r.query == "q")
    # 0.95 x -0.2 = -0.19 would let "closer" (scoring above the positive) in; the ceiling is -0.21
    assert [n.text for n in rec.negatives] == ["lower", "far"]


# ---------------------------------------------------------------------------- readers and the CLI


@pytest.mark.parametrize("name,text,read,message", [
    ("lab.jsonl", '{"text": "a", "label": "x"}\n\n{"text": "b"}\n', read_labeled, r"lab\.jsonl:3: needs a 'label'"),
    ("lab.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": [1]}\n', read_labeled,
     r"lab\.jsonl:2: 'label' must be"),
    ("sts.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 4}\n{"sentence1": "a", "sentence2": "b", '
                  '"score": "high"}\n', read_sts_pairs, r"sts\.jsonl:2: 'score' must be a number"),
    ("sts.jsonl", '{"sentence1": "a", "sentence2": "b", "score": 40}\n', lambda p: read_sts_pairs(p, 5.0),
     r"sts\.jsonl:1: score 40 is outside \[0, 5\]"),
    ("sts.jsonl", '{"sentence1": "", "sentence2": "b", "score": 4}\n', read_sts_pairs,
     r"sts\.jsonl:1: 'sentence1' is empty"),
])
def test_readers_name_file_and_line(tmp_path, name, text, read, message):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(CurateError, match=message):
        read(p)


def test_cli_convert_classification_and_sts(tmp_path):
    lab = tmp_path / "news.jsonl"
    lab.write_text("".join(json.dumps({"text": t, "label": lab_}) + "\n" for t, lab_ in NEWS))
    out = tmp_path / "cls"
    proc = run_curate("convert", "--kind", "classification", "--in", str(lab), "--out", str(out),
                      "--task-text", "Classify the topic of a news sentence.")
    assert proc.returncode == 0, proc.stderr
    rows = read_jsonl(out / "converted.jsonl")
    records = [Record.from_dict(r) for r in rows]
    texts, labels = zip(*NEWS)
    check_label_structure(records, texts, labels)
    assert {r.task for r in records} == {"Classify the topic of a news sentence."}
    summary = json.loads((out / "report.json").read_text())
    assert summary["records"] == len(records) == len(NEWS) - 1
    assert not list(out.glob(".*.tmp")), "written through a temporary name"

    sts = tmp_path / "sts.jsonl"
    sts.write_text("".join(json.dumps({"sentence1": a, "sentence2": b, "score": s}) + "\n" for a, b, s in STS))
    out2 = tmp_path / "sts"
    proc = run_curate("convert", "--kind", "sts", "--in", str(sts), "--out", str(out2), "--min-score", "4.5",
                      env={"CURATE_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    rows = read_jsonl(out2 / "converted.jsonl")
    pairs = Counter((r["query"], r["positive"]) for r in rows)
    want = [(a, b) for a, b, s in STS if s >= 4.5 and a != b]
    assert set(pairs) == set(want) | {(b, a) for a, b in want}
    assert all(n["source"] == "mined" for r in rows for n in r["negatives"])


def test_cli_convert_errors_are_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "y"\n')
    proc = run_curate("convert", "--kind", "clustering", "--in", str(bad), "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, "bad.jsonl:2", "invalid JSON")
    assert not (tmp_path / "o" / "converted.jsonl").exists()

    sts = tmp_path / "sts.jsonl"
    sts.write_text('{"sentence1": "a b", "sentence2": "c d", "score": 4.5}\n{"sentence1": "e", "score": 3}\n')
    proc = run_curate("convert", "--kind", "sts", "--in", str(sts), "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, "sts.jsonl:2", "sentence2")

    one = tmp_path / "one.jsonl"
    one.write_text('{"text": "a", "label": "x"}\n{"text": "b", "label": "x"}\n')
    proc = run_curate("convert", "--kind", "classification", "--in", str(one), "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, "two labels")

    proc = run_curate("convert", "--kind", "classification", "--in", str(one), "--out", str(tmp_path / "o"),
                      "--teacher", "--random-negatives")
    assert_one_line_error(proc, "--teacher", "--random-negatives")
