"""The core of `curate export`: levels, curriculum phases, batch layout, dev split, decontamination.

Records are built from real data: SciFact train claims with their labelled abstracts, as
generated-style records (four levelled negatives, several tasks) and as mined records
(``curate mine`` itself, run with a bag-of-words teacher so it needs no model). The core is
checked on the rows it hands to the format writers, through a stand-in writer that keeps
them; one CLI run at the end goes through the real format registry.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from dataclasses import asdict
from itertools import groupby
from pathlib import Path

import numpy as np
import pytest

import curate.export.main as export_main
from curate.datasets.beir import load_beir
from curate.core.errors import CurateError
from curate.export.curriculum import deal, parse_curriculum
from curate.export.inputs import Item, load_inputs
from curate.export.instructions import Instruction
from curate.export.levels import assign_levels
from curate.export.main import ExportOptions, run_export
from curate.mine.main import MineOptions, run_mine
from curate.dedup.shingles import word_shingles
from curate.dedup.shingles import normalize
from curate.core.records import Negative, Record
from tests.helpers import SHARED_DATA, assert_one_line_error, read_jsonl, run_curate
from tests.mine_helpers import HashTeacher, write_jsonl

SCIFACT = SHARED_DATA / "scifact"
NFCORPUS = SHARED_DATA / "nfcorpus"
TASKS = [  # (family, task text, share of the claims): uneven on purpose
    ("short-long", "Given a scientific claim, retrieve abstracts that support or refute it", 5),
    ("short-long", "Given a health claim, find the study that tests it", 3),
    ("long-short", "Given an abstract, retrieve the claim it is evidence for", 2),
    ("short-short", "Given a claim, retrieve claims about the same finding", 2),
    ("sts", "Retrieve sentences with the same meaning", 1),
]


class WordTeacher(HashTeacher):
    """A lexical stand-in teacher: hashed bag of words, so scores follow real word overlap."""

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, np.float32)
        for w in re.findall(r"\w+", text.lower()):
            v[int.from_bytes(hashlib.md5(w.encode()).digest()[:4], "little") % self.dim] += 1.0
        n = np.linalg.norm(v)
        return v / n if n else v


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export-core")
    train = load_beir(SCIFACT, "train")
    docs = list(train.corpus.values())
    rng = random.Random(7)
    weights = [share for _, _, share in TASKS]
    generated = []
    for qid, rel in train.qrels.items():
        family, task, _ = TASKS[rng.choices(range(len(TASKS)), weights)[0]]
        negs = [Negative(text=docs[rng.randrange(len(docs))], level=lv) for lv in (1, 2, 3, 4)]
        generated.append(Record(id=f"gen-{qid}", task_type=family, task=task, query=train.queries[qid],
                                positive=train.corpus[next(iter(rel))], negatives=negs))
    gen_path = write_jsonl(tmp / "gen" / "filtered.jsonl", (r.to_dict() for r in generated))
    mined_dir = tmp / "mined"
    run_mine(MineOptions(out=str(mined_dir), data=str(SCIFACT), split="train", method="naive", k=4, limit=240,
                         positive_top=0,
                         plots=False), teachers=[WordTeacher("words", dim=512)])
    return {"tmp": tmp, "gen": gen_path, "mined": mined_dir / "mined.jsonl", "generated": generated}


def _export(tmp: Path, inputs, name: str, **kw) -> tuple[list, dict]:
    """run_export through a stand-in writer that keeps the rows it is given."""
    kept = {}

    def keep(rows, out_dir, card):
        out_dir.mkdir(parents=True, exist_ok=True)
        kept["rows"] = rows
        path = out_dir / "rows.jsonl"
        path.write_text("".join(json.dumps(asdict(r)) + "\n" for r in rows), encoding="utf-8")
        return [path]

    orig = export_main._writers
    export_main._writers = lambda: {"rows": keep}
    try:
        report = run_export(ExportOptions(inputs=tuple(str(p) for p in inputs), out=str(tmp / name),
                                          formats=("rows",), **{"audit": False, **kw}))  # tests/audit/ audits
    finally:
        export_main._writers = orig
    return kept["rows"], report


def _batches(rows, split="train"):
    return [list(g) for _, g in groupby((r for r in rows if r.split == split), key=lambda r: r.batch)]


def _key(r) -> tuple:
    return (r.task_type, r.task, r.meta["export"].get("dataset", ""))


# ---------------------------------------------------------------------------- levels


def test_mined_levels_are_gap_quartiles(data):
    items, _ = load_inputs([data["mined"]])
    stats = assign_levels(items)
    levels = [it.levels for it in items]
    gaps = []
    for it, lv in zip(items, levels):
        pos = it.record.teacher.positive
        gaps += [(pos - n.teacher_score, level) for n, level in zip(it.record.negatives, lv)]
    assert stats["from_gap"] == len(gaps) > 800 and stats["given"] == stats["by_position"] == 0
    per_level = Counter(level for _, level in gaps)
    assert set(per_level) == {1, 2, 3, 4}
    assert max(per_level.values()) - min(per_level.values()) <= 1  # a quarter each
    spans = {lv: (min(g for g, l in gaps if l == lv), max(g for g, l in gaps if l == lv)) for lv in per_level}
    for lv in (1, 2, 3):  # smaller gap = harder: the bins are ordered and do not overlap
        assert spans[lv][1] <= spans[lv + 1][0]
    assert stats["gap_edges"] == [round(spans[lv][1], 6) for lv in (1, 2, 3)]


def test_gap_ranks_within_a_record_give_every_level_and_pure_phases(data):
    items, _ = load_inputs([data["mined"]])
    stats = assign_levels(items, "record")
    levels = [it.levels for it in items]
    assert stats["gap_bins"] == "record"
    for it, lv in zip(items, levels):
        assert sorted(lv) == [1, 2, 3, 4]  # k=4: one of each
        order = sorted(range(4), key=lambda k: -it.record.negatives[k].teacher_score)
        assert [lv[k] for k in order] == [1, 2, 3, 4]  # highest score = smallest gap = hardest
    rows, report = _export(data["tmp"], [data["mined"]], "mgh-rank", curriculum="mgh", gap_levels="record",
                           batch_size=8, dev_fraction=0)
    assert report["curriculum"].get("rows_with_substituted_level", 0) == 0
    assert all(r.levels == [5 - r.phase] for r in rows)


def test_given_levels_kept_and_unscored_negatives_placed_by_position(data):
    gen = data["generated"][0]
    bare = Record(id="bare", task_type="short-long", task="t", query="q", positive="p",
                  negatives=[Negative(text=f"n{i}") for i in range(4)])
    items = [Item(gen, "a"), Item(bare, "b")]
    stats = assign_levels(items)
    levels = [it.levels for it in items]
    assert levels[0] == [n.level for n in gen.negatives]
    assert levels[1] == [1, 2, 3, 4]
    assert stats["by_position"] == 4 and stats["given"] == 4
    bad = Record(id="odd", task_type="x", task="t", query="q", positive="p", negatives=[Negative("n", level=7)])
    with pytest.raises(CurateError, match="odd.*level 7"):
        assign_levels([Item(bad, "file.jsonl")])


# ---------------------------------------------------------------------------- curriculum


@pytest.mark.parametrize("arm,levels", [("mgh", [4, 3, 2, 1]), ("reverse", [1, 2, 3, 4])])
def test_phases_hold_in_exported_order(data, arm, levels):
    rows, report = _export(data["tmp"], [data["gen"]], arm, curriculum=arm, batch_size=16, dev_fraction=0)
    train = [r for r in rows if r.split == "train"]
    assert len(train) == len(data["generated"])
    phases = [r.phase for r in train]
    assert phases == sorted(phases) and set(phases) == {1, 2, 3, 4}  # consecutive, in order
    assert all(r.levels == [levels[r.phase - 1]] for r in train)  # every generated record has all levels
    sizes = Counter(phases)
    assert max(sizes.values()) - min(sizes.values()) <= 2 * 16  # four about equal phases
    for batch in _batches(rows):  # a phase starts and ends on a batch boundary
        assert len({r.phase for r in batch}) == 1
    assert report["curriculum"].get("rows_with_substituted_level", 0) == 0
    assert report["counts"]["phase"] == {str(p): n for p, n in sorted(sizes.items())}


def test_mined_rows_take_the_nearest_level_and_count_it(data):
    rows, report = _export(data["tmp"], [data["mined"]], "mgh-mined", curriculum="mgh", batch_size=8,
                           dev_fraction=0)
    targets = {1: 4, 2: 3, 3: 2, 4: 1}
    off = [r for r in rows if r.levels and r.levels[0] != targets[r.phase]]
    assert report["curriculum"].get("rows_with_substituted_level", 0) == len(off) > 0
    items, _ = load_inputs([data["mined"]])
    assign_levels(items)
    all_levels = {it.record.id: it.levels for it in items}
    for r in off:  # a substitute is the nearest level the record has
        have = all_levels[r.record_id]
        assert targets[r.phase] not in have
        assert abs(r.levels[0] - targets[r.phase]) == min(abs(lv - targets[r.phase]) for lv in have)


def test_mined_records_are_dealt_to_the_phase_of_a_level_they_have(data):
    """Mined negatives of one query bunch in a few gap bins; dealing by level lets almost every
    row carry its phase's level (dealing blindly would substitute for most of them)."""
    rows, report = _export(data["tmp"], [data["mined"]], "mgh-deal", curriculum="mgh", batch_size=8,
                           dev_fraction=0)
    train = [r for r in rows if r.split == "train"]
    exact = [r for r in train if r.levels == [5 - r.phase]]
    assert len(exact) >= 0.95 * len(train)
    items, _ = load_inputs([data["mined"]])
    assign_levels(items)
    all_levels = {it.record.id: it.levels for it in items}
    blind = deal([it for it in items], parse_curriculum("mgh"), 8, 0, by_level=False)  # the same phases, dealt blindly
    blind_exact = sum(5 - p in all_levels[it.record.id] for p, phase in enumerate(blind, 1) for it in phase)
    assert len(exact) > blind_exact
    gaps = {p: [r.positive_score - r.negative_scores[0] for r in train if r.phase == p] for p in (1, 4)}
    assert sum(gaps[1]) / len(gaps[1]) > sum(gaps[4]) / len(gaps[4])  # easy (wide gap) first


def test_fixed_random_and_none_arms(data):
    fixed, _ = _export(data["tmp"], [data["gen"]], "fixed", curriculum="fixed:2", dev_fraction=0)
    assert all(r.levels == [2] and r.phase is None for r in fixed)
    two, _ = _export(data["tmp"], [data["gen"]], "fixed2", curriculum="fixed:2", dev_fraction=0, negatives_per_row=2)
    assert all(r.levels == [2, 3] for r in two)  # then the nearest level, the easier one on a tie
    rand, _ = _export(data["tmp"], [data["gen"]], "random", curriculum="random", dev_fraction=0, seed=3)
    seq = [r.levels[0] for r in rand]
    assert set(seq) == {1, 2, 3, 4} and seq != sorted(seq) and seq != sorted(seq, reverse=True)
    assert max(Counter(seq).values()) < 0.3 * len(seq)
    again, _ = _export(data["tmp"], [data["gen"]], "random", curriculum="random", dev_fraction=0, seed=3)
    assert [(r.record_id, r.levels) for r in again] == [(r.record_id, r.levels) for r in rand]
    by_id = {r.id: r for r in data["generated"]}
    # none, the default: each row carries its record's hardest negative
    none, report = _export(data["tmp"], [data["gen"]], "none", curriculum="none", dev_fraction=0, instruction="none")
    assert report["parameters"]["negatives_per_row"] == 1
    for r in none:
        assert r.levels == [1] and r.phase is None
        assert r.negatives == [next(n.text for n in by_id[r.record_id].negatives if n.level == 1)]
    every, _ = _export(data["tmp"], [data["gen"]], "none-all", curriculum="none", dev_fraction=0, instruction="none",
                       negatives_per_row=None)
    for r in every:
        assert r.levels == [1, 2, 3, 4] and r.phase is None
        assert r.negatives == [n.text for n in sorted(by_id[r.record_id].negatives, key=lambda n: n.level)]


def test_ordered_keeps_every_negative_and_trains_easy_records_first(data):
    """``ordered``: all of a record's negatives on its row (as ``none``), records in four
    phases by the mean level of their negatives, easiest first."""
    rows, report = _export(data["tmp"], [data["mined"]], "ordered", curriculum="ordered", batch_size=8,
                           dev_fraction=0, negatives_per_row=None)
    train = [r for r in rows if r.split == "train"]
    items, _ = load_inputs([data["mined"]])
    assign_levels(items)
    all_levels = {it.record.id: it.levels for it in items}
    assert all(sorted(r.levels) == sorted(all_levels[r.record_id]) for r in train)  # nothing dropped
    assert all(r.levels == sorted(r.levels) for r in train)  # hardest first on the row
    phases = [r.phase for r in train]
    assert phases == sorted(phases) and set(phases) == {1, 2, 3, 4}
    ease = {p: [sum(all_levels[r.record_id]) / len(all_levels[r.record_id]) for r in train if r.phase == p]
            for p in (1, 2, 3, 4)}
    means = [sum(v) / len(v) for v in ease.values()]
    assert means == sorted(means, reverse=True) and means[0] > means[3] + 1  # clearly easy to hard
    for batch in _batches(rows):
        assert len({r.phase for r in batch}) == 1
    assert report["parameters"]["negatives_per_row"] == "all"
    assert report["curriculum"]["arm"] == "ordered"


def test_instruction_auto_is_none_for_one_task_and_e5_for_several(data):
    mined, report = _export(data["tmp"], [data["mined"]], "auto-one", dev_fraction=0)
    assert report["parameters"]["instruction"] == "none" and report["parameters"]["instruction_asked"] == "auto"
    assert all(r.query_text == r.query and r.instruction == "" for r in mined)
    both, report = _export(data["tmp"], [data["gen"], data["mined"]], "auto-many", dev_fraction=0)
    assert report["parameters"]["instruction"] == "e5"
    assert all(r.query_text == f"Instruct: {r.task}\nQuery: {r.query}" for r in both)
    _, report = _export(data["tmp"], [data["mined"]], "asked-e5", dev_fraction=0, instruction="e5")
    assert report["parameters"]["instruction"] == "e5" and "instruction_asked" not in report["parameters"]


def test_the_export_enters_the_ordering_policy_once(data, monkeypatch):
    """The export is one straight path: once the options are checked, ``curriculum.py`` (and
    ``batching.py``, which it drives) is entered once, and the rows, the card and the writers
    never call back into either."""
    import sys

    import curate.export.batching as batching_mod
    import curate.export.curriculum as curriculum_mod

    policy = {curriculum_mod.__file__, batching_mod.__file__}
    entries: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename in policy and (
                frame.f_back is None or frame.f_back.f_code.co_filename not in policy):
            entries.append(frame.f_code.co_name)

    real = export_main._export

    def traced(*args, **kwargs):
        sys.setprofile(profile)
        try:
            return real(*args, **kwargs)
        finally:
            sys.setprofile(None)

    monkeypatch.setattr(export_main, "_export", traced)
    rows, report = _export(data["tmp"], [data["mined"], data["gen"]], "one-path", curriculum="mgh", batch_size=8,
                           mixed_tail=1)
    assert entries == ["order"]
    assert {r.split for r in rows} == {"train", "dev"} and {r.phase for r in rows if r.split == "train"} == {1, 2, 3, 4}
    assert report["curriculum"]["arm"] == "mgh" and report["batching"]["train"]["mixed"] >= 1


# ---------------------------------------------------------------------------- batching


def _check_batches(rows, size):
    for split in ("train", "dev"):
        batches = _batches(rows, split)
        assert [b[0].batch for b in batches] == list(range(len(batches)))  # consecutive numbers
        assert all(len(b) == size for b in batches[:-1])  # only a split's last batch may be short
        for b in batches:  # no query or positive text twice in a batch
            assert len({normalize(r.query) for r in b}) == len(b)
            assert len({normalize(r.positive) for r in b}) == len(b)


def test_homogeneous_batches_one_task_each_until_the_phase_leftovers(data):
    rows, report = _export(data["tmp"], [data["gen"], data["mined"]], "homog", curriculum="mgh", batch_size=8,
                           dev_fraction=0.1, instruction="none")
    _check_batches(rows, 8)
    train = _batches(rows)
    # SciFact claims share abstracts, so the no-repeat rule is really exercised
    positives = Counter(normalize(r.positive) for r in rows)
    assert max(positives.values()) > 1
    for phase in (1, 2, 3, 4):
        kinds = [b[0].meta["export"]["batch_kind"] for b in train if b[0].phase == phase]
        assert kinds[0] == "task" and kinds == sorted(kinds, key=lambda k: k != "task")  # mixed only at the end
        for b in train:
            if b[0].phase == phase and b[0].meta["export"]["batch_kind"] == "task":
                assert len({_key(r) for r in b}) == 1
    assert report["batching"]["train"]["task"] > 3 * report["batching"]["train"].get("mixed", 0)
    # mined SciFact claims are a task of their own (the dataset name tells them apart)
    assert any(_key(b[0])[2] == "scifact" and len({_key(r) for r in b}) == 1 for b in train)


def test_fixed_task_order_repeats_in_every_block(data):
    rows, _ = _export(data["tmp"], [data["gen"]], "fixed-order", curriculum="mgh", batch_size=8, dev_fraction=0,
                      task_order="fixed")
    order = None
    for phase in (1, 2, 3, 4):
        seq = [_key(b[0]) for b in _batches(rows) if b[0].phase == phase
               and b[0].meta["export"]["batch_kind"] == "task"]
        blocks, block = [], []
        for key in seq:  # a block ends where a task comes round again
            if key in block:
                blocks.append(block)
                block = []
            block.append(key)
        blocks.append(block)
        assert len(blocks) >= 3
        order = order or blocks[0]
        assert blocks[0] == order  # the same order in every phase
        for b in blocks:  # and in every block, tasks that ran out just drop out
            assert b == [k for k in order if k in b]
    assert len(order) == len(TASKS)


def test_blended_and_mixed_tail(data):
    rows, report = _export(data["tmp"], [data["gen"]], "blend", curriculum="none", batch_size=16, dev_fraction=0,
                           batch_layout="blended")
    _check_batches(rows, 16)
    assert sum(len({_key(r) for r in b}) > 1 for b in _batches(rows)) >= 0.9 * len(_batches(rows))
    rows, report = _export(data["tmp"], [data["gen"]], "tail", curriculum="mgh", batch_size=16, dev_fraction=0,
                           mixed_tail=5)
    _check_batches(rows, 16)
    batches = _batches(rows)
    assert all(len({_key(r) for r in b}) > 1 for b in batches[-5:])
    assert all(len({_key(r) for r in b}) == 1 for b in batches[:5])
    assert {r.phase for b in batches[-5:] for r in b} == {4}  # the tail is part of the last phase


# ---------------------------------------------------------------------------- split


def test_dev_split_holds_whole_tasks_and_no_query_crosses(data):
    gen = data["generated"]
    twins = [Record(**{**gen[0].to_dict(), "id": f"twin-{k}", "task_type": family, "task": task,
                       "negatives": gen[0].negatives})  # the same claim asked under every other task
             for k, (family, task, _) in enumerate(TASKS) if task != gen[0].task]
    path = write_jsonl(data["tmp"] / "twin" / "records.jsonl", (r.to_dict() for r in gen + twins))
    rows, report = _export(data["tmp"], [path], "split", curriculum="mgh", dev_fraction=0.15, batch_size=8)
    train = [r for r in rows if r.split == "train"]
    dev = [r for r in rows if r.split == "dev"]
    assert report["split"]["mode"] == "by-task" and dev
    assert not {_key(r) for r in train} & {_key(r) for r in dev}
    assert not {normalize(r.query) for r in train} & {normalize(r.query) for r in dev}
    assert report["split"]["dropped_query_in_dev"] >= 1  # some dev task holds the claim: train copies went
    dropped = sum(f["records_dropped"] for f in report["filters"])
    assert len(train) + len(dev) + dropped == len(gen) + len(twins)
    batch_repeat = sum(f["records_dropped"] for f in report["filters"] if f["step"] == "batch-repeat")
    lineage = read_jsonl(data["tmp"] / "split" / "rejected.jsonl")
    assert len([r for r in lineage if r["reason"] == "batch-repeat"]) == batch_repeat
    # every drop is a line of rejected.jsonl, the dev overlap too, and the card's counts are its counts
    overlap = {r["id"] for r in lineage if r["reason"] == "dev-query-overlap"}
    assert len(overlap) == report["split"]["dropped_query_in_dev"]
    assert overlap.isdisjoint(r.record_id for r in rows)
    assert len(lineage) == dropped and all(r["stage"] == "export" and r["detail"]["source"] for r in lineage)
    assert all(r.phase is None and r.levels == [1] for r in dev)  # dev asks the hardest level
    _check_batches(rows, 8)


def test_single_task_falls_back_to_holding_out_queries(data):
    rows, report = _export(data["tmp"], [data["mined"]], "split-mined", dev_fraction=0.1)
    assert report["split"]["mode"] == "by-query" and "queries were held out" in report["split"]["note"]
    dev = {normalize(r.query) for r in rows if r.split == "dev"}
    train = {normalize(r.query) for r in rows if r.split == "train"}
    assert dev and not dev & train
    assert abs(len([r for r in rows if r.split == "dev"]) - 0.1 * len(rows)) <= 3


# ---------------------------------------------------------------------------- decontamination


def _exact_jaccard(a: str, b: str) -> float:
    x, y = word_shingles(a, 1), word_shingles(b, 1)
    return len(x & y) / len(x | y)


def test_decontamination_drops_planted_copies_of_scifact_test(data):
    nf = load_beir(NFCORPUS, "train")
    sf = load_beir(SCIFACT, "test")
    clean = [Record(id=f"nf-{q}", task_type="short-long", task="Given a question, retrieve nutrition articles",
                    query=nf.queries[q], positive=nf.corpus[next(iter(rel))], negatives=[Negative("x", level=1)])
             for q, rel in list(nf.qrels.items())[:400]]
    qids = [q for q in sf.qrels if len(sf.queries[q].split()) >= 10][:3]
    claim, doc_id = sf.queries[qids[0]], next(iter(sf.qrels[qids[1]]))
    words = sf.queries[qids[2]].split()
    planted = {  # id -> (field, eval id it copies)
        "copy-query": (claim.lower().rstrip(".") + " indeed", f"query:{qids[0]}"),
        "edit-query": (" ".join(words[:-2] + ["strongly"] + words[-2:]), f"query:{qids[2]}"),
        "copy-doc": (sf.corpus[doc_id].replace(".", ";", 2) + " Reprinted with permission.", f"doc:{doc_id}"),
    }
    control = " ".join(words[: len(words) // 2]) + " has nothing to do with vitamin intake in athletes"
    extra = [Record(id=i, task_type="short-long", task="t", query=text if "query" in i else "a question",
                    positive=text if i == "copy-doc" else "an unrelated answer text", negatives=[Negative("x")])
             for i, (text, _) in planted.items()]
    extra.append(Record(id="near-miss", task_type="short-long", task="t", query=control, positive="some answer",
                        negatives=[Negative("x")]))
    path = write_jsonl(data["tmp"] / "decon" / "records.jsonl", (r.to_dict() for r in clean + extra))
    rows, report = _export(data["tmp"], [path], "decon-out", decontaminate=(str(SCIFACT),), dev_fraction=0)
    dropped = {d["id"]: d["detail"] for d in read_jsonl(data["tmp"] / "decon-out" / "rejected.jsonl")
               if d["reason"] == "decontaminate"}  # with the evaluation texts each matched
    for rid, (_, eval_id) in planted.items():
        assert rid in dropped and eval_id in {m["eval"] for m in dropped[rid]["matches"]}
    assert dropped["copy-doc"]["matches"][0]["field"] == "positive"
    assert "near-miss" not in dropped
    texts = {f"query:{k}": v for k, v in load_beir(SCIFACT, None).queries.items()}
    texts.update({f"doc:{k}": v for k, v in load_beir(SCIFACT, None).corpus.items()})
    records = {r.id: r for r in clean + extra}
    for rid, d in dropped.items():  # every other drop is a real copy: NFCorpus shares some PubMed abstracts
        m = d["matches"][0]
        assert _exact_jaccard(getattr(records[rid], m["field"]), texts[m["eval"]]) >= 0.7
    assert len(dropped) - len(planted) <= 0.03 * len(clean)
    assert {r.record_id for r in rows}.isdisjoint(dropped)
    step = [f for f in report["filters"] if f["step"] == "decontaminate" and "folder" in f][0]
    assert step["records_matched"] == len(dropped) and step["query_matched"] >= 2
    # the run folder's lineage names the same records, as every stage's rejected.jsonl does
    lineage = read_jsonl(data["tmp"] / "decon-out" / "rejected.jsonl")
    assert {r["id"] for r in lineage if r["reason"] == "decontaminate"} == set(dropped)
    assert all(r["stage"] == "export" for r in lineage)


def test_decontaminating_against_a_split_keeps_the_shared_corpus(data):
    """SciFact train against SciFact:test: the corpus is shared, so only test claims and the
    abstracts test claims cite count -- train records citing other abstracts stay."""
    test = load_beir(SCIFACT, "test")
    cited = {d for rel in test.qrels.values() for d in rel}
    gen = [r for r in data["generated"]]
    rows, report = _export(data["tmp"], [data["gen"]], "decon-split", decontaminate=(f"{SCIFACT}:test",),
                           dev_fraction=0)
    dropped = {d["id"]: d["detail"] for d in read_jsonl(data["tmp"] / "decon-split" / "rejected.jsonl")
               if d["reason"] == "decontaminate"}
    train = load_beir(SCIFACT, "train")
    by_text = {t: d for d, t in train.corpus.items()}
    for r in gen:
        if by_text.get(r.positive) in cited:  # its positive is an abstract a test claim cites
            assert r.id in dropped
    assert 0 < len(dropped) < len(gen) / 2 and len(rows) == len(gen) - len(dropped)
    step = next(f for f in report["filters"] if f["step"] == "decontaminate")  # the card counts the set
    assert (step["eval_queries"], step["eval_documents"]) == (len(test.qrels), len(cited))
    for d in dropped.values():
        assert all(m["eval"].removeprefix("doc:") in cited or m["eval"].startswith("query:") for m in d["matches"])


# ---------------------------------------------------------------------------- instructions and rows


def test_instructions_and_symmetric_tasks(data):
    e5 = Instruction("e5")
    assert e5.apply("Find papers", "q") == "Instruct: Find papers\nQuery: q"
    assert e5.prefix("Find papers") == "Instruct: Find papers\nQuery: "
    assert Instruction("nv").apply("Find papers", "q") == "Find papers: q"
    assert Instruction("{{ task | upper }} >> {{ query }}").apply("find", "q") == "FIND >> q"
    with pytest.raises(CurateError, match="query"):
        Instruction("{{ task }} only")
    with pytest.raises(CurateError, match="not e5, nv, none"):
        Instruction("e6")
    rows, _ = _export(data["tmp"], [data["gen"]], "instr", curriculum="fixed:1", dev_fraction=0)
    for r in rows:
        assert r.query_text == f"Instruct: {r.task}\nQuery: {r.query}"
        docs = [r.positive] + r.negatives
        if r.task_type == "sts":
            assert r.symmetric and all(d.startswith(r.instruction) for d in docs)
        else:
            assert not r.symmetric and not any(d.startswith("Instruct:") for d in docs)


def test_mined_rows_carry_ids_and_scores(data):
    rows, _ = _export(data["tmp"], [data["mined"]], "ids", curriculum="none", dev_fraction=0)
    by_id = {r["id"]: r for r in read_jsonl(data["mined"])}
    for r in rows:
        rec = by_id[r.record_id]
        assert r.positive_id == rec["positive_id"]
        want = {n["text"]: n["doc_id"] for n in rec["negatives"]}
        assert r.negative_ids == [want[t] for t in r.negatives]
        assert r.negative_scores == sorted(r.negative_scores, reverse=True)  # hardest (closest) first


# ---------------------------------------------------------------------------- inputs, outputs, errors


def test_duplicate_ids_and_atomic_output(data, tmp_path):
    rows, report = _export(tmp_path, [data["gen"], data["gen"]], "dup", dev_fraction=0)
    assert len(rows) == len(data["generated"])
    assert report["filters"][0] == {"step": "duplicate-id", "records_dropped": len(data["generated"]),
                                    "note": "a record id already read from an earlier --in"}
    assert report["sources"][1]["duplicates_skipped"] == len(data["generated"])
    lineage = read_jsonl(tmp_path / "dup" / "rejected.jsonl")
    assert sorted(r["id"] for r in lineage if r["reason"] == "duplicate-id") == sorted(r.id for r in data["generated"])

    def broken(rows, out_dir, card):
        (out_dir / "half.jsonl").write_text("{", encoding="utf-8")
        raise RuntimeError("disk full")

    orig = export_main._writers
    export_main._writers = lambda: {"rows": broken}
    try:
        with pytest.raises(RuntimeError):
            run_export(ExportOptions(inputs=(str(data["gen"]),), out=str(tmp_path / "dup"), formats=("rows",)))
    finally:
        export_main._writers = orig
    assert (tmp_path / "dup" / "rows.jsonl").is_file()  # the earlier export is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup"]  # and no temporary folder is left
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(CurateError, match="not an earlier export"):
        _export(tmp_path, [data["gen"]], "mine")


def test_bad_input_is_one_line(data, tmp_path):
    proc = run_curate("export", "--in", str(data["gen"]), "--out", str(tmp_path / "x"), "--curriculum", "mgh2")
    assert_one_line_error(proc, "--curriculum", "fixed:N")
    proc = run_curate("export", "--in", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "x"))
    assert_one_line_error(proc, "missing.jsonl", "no such file")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(data["gen"].read_text(encoding="utf-8").splitlines()[0] + "\n{oops\n", encoding="utf-8")
    proc = run_curate("export", "--in", str(bad), "--out", str(tmp_path / "x"))
    assert_one_line_error(proc, f"{bad}:2", "invalid JSON")
    proc = run_curate("export", "--in", str(data["gen"]), "--out", str(tmp_path / "x"), "--format", "csv")
    assert_one_line_error(proc, "unknown --format csv")
    assert not (tmp_path / "x").exists()


def test_cli_exports_every_format(data, tmp_path):
    pytest.importorskip("curate.export.formats")
    out = tmp_path / "all"
    proc = run_curate("export", "--in", str(data["gen"]), "--in", str(data["mined"]), "--format", "all",
                      "--curriculum", "mgh", "--batch-size", "16", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    from curate.export.formats import in_order

    assert list(report["outputs"]) == in_order()
    for name, files in report["outputs"].items():
        assert files and all((out / f).is_file() for f in files), name
    n = len(data["generated"]) + len(read_jsonl(data["mined"]))
    assert report["counts"]["train"] + report["counts"]["dev"] + sum(
        f.get("records_dropped", 0) for f in report["filters"]) == n
    # the top of the folder: a card naming each Parquet format as a datasets config (no silent pick)
    # and the training command of every format with the export's own settings
    from datasets import load_dataset

    default = load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    hf = load_dataset(str(out), "hf", cache_dir=str(tmp_path / "cache"))
    assert set(default) == set(hf) == {"train", "dev"}
    assert default["train"].column_names[:2] == ["anchor", "positive"] and "record_id" in hf["train"].column_names
    assert default["train"].num_rows == hf["train"].num_rows == report["counts"]["train"]
    meta = _card(out).data.to_dict()
    assert all(meta.get(k) for k in HUB_KEYS)
    text = (out / "README.md").read_text(encoding="utf-8")
    per_row = report["parameters"]["negatives_per_row"]
    assert f"--train_group_size {per_row + 1}" in text and f'"num_hard_negatives": {per_row}' in text
    assert "--query_prefix \"\" --passage_prefix \"\"" in text
    assert "--knowledge_distillation True" not in text  # generated rows have no teacher scores


RANKS = {"agree": lambda i, rng: rng.randint(1, 10), "disagree": lambda i, rng: rng.randint(11, 400),
         "half": lambda i, rng: 3 if i % 2 == 0 else 300,
         "above-within-noise": lambda i, rng: 3 if i % 50 < 27 else 300}  # 54% of 240 records


@pytest.mark.parametrize("case,expect", [("agree", None), ("disagree", 1), ("half", 1), ("above-within-noise", 1)])
def test_negatives_per_row_auto_follows_the_teachers_agreement_with_the_labels(data, case, expect):
    """auto (the default): every negative where the teacher ranks more than half of the labelled
    positives in its top 10 beyond the sampling error of that share, the hardest one where it does
    not or cannot tell (a share above one half measured on few records), one for records it never ranked."""
    rng = random.Random(5)
    records = [json.loads(line) for line in data["mined"].read_text(encoding="utf-8").splitlines()]
    for i, rec in enumerate(records):
        rec["teacher"]["positive_rank"] = RANKS[case](i, rng)
    ranked = data["tmp"] / f"ranked-{case}.jsonl"
    ranked.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    rows, report = _export(data["tmp"], [ranked], f"auto-{case}", dev_fraction=0, batch_size=8)
    card = report["negatives_per_row"]
    assert report["parameters"]["negatives_per_row"] == ("all" if expect is None else expect)
    assert report["parameters"]["negatives_per_row_asked"] == "auto"
    assert card["records_ranked"] == len(records) and card["chose"] == ("all" if expect is None else 1)
    top = sum(r["teacher"]["positive_rank"] <= 10 for r in records) / len(records)
    assert card["positive_in_teacher_top_10"] == pytest.approx(top, abs=1e-4)
    assert card["share_low_95"] <= top and (card["share_low_95"] > 0.5) == (expect is None)
    if case == "above-within-noise":
        assert top > 0.5
    by_id = {r["id"]: r for r in records}
    assert rows and all(len(row.negatives) == (len(by_id[row.record_id]["negatives"]) if expect is None else 1)
                        for row in rows)
    assert expect == 1 or max(len(row.negatives) for row in rows) == 4  # k=4: all of them
    # records no teacher ranked (LLM-written) keep the hardest one
    gen_rows, gen_report = _export(data["tmp"], [data["gen"]], f"auto-gen-{case}", dev_fraction=0,
                                   instruction="none")
    assert gen_report["negatives_per_row"]["records_ranked"] == 0
    assert gen_rows and all(len(r.negatives) == 1 for r in gen_rows)


@pytest.mark.parametrize("layout", ["negative", "meta"])
def test_negatives_per_row_auto_takes_every_negative_of_relabelled_records(data, layout):
    """Where relabel judged every negative a record keeps not relevant, none is an unlabelled
    positive: auto takes them all even where the teacher disagrees with the labels; one record
    with a negative nobody judged sends it back to the agreement rule (here: the hardest one).
    ``meta``: records written before the verdicts moved onto the negatives (``meta.relabel``),
    which read the same for one release."""
    rng = random.Random(5)
    records = [json.loads(line) for line in data["mined"].read_text(encoding="utf-8").splitlines()]
    verdict = {"verdict": "not_relevant", "tier": 1}
    for rec in records:
        rec["teacher"]["positive_rank"] = RANKS["disagree"](0, rng)
        if layout == "meta":
            rec["meta"]["relabel"] = [{"index": k, "doc_id": n.get("doc_id"), **verdict}
                                      for k, n in enumerate(rec["negatives"])]
        else:
            for n in rec["negatives"]:
                n["judges"] = {**(n.get("judges") or {}), "relabel": dict(verdict)}
    vetted = data["tmp"] / f"relabelled-{layout}.jsonl"
    vetted.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    rows, report = _export(data["tmp"], [vetted], f"auto-relabelled-{layout}", dev_fraction=0, batch_size=8)
    assert report["negatives_per_row"]["chose"] == "all"
    assert report["negatives_per_row"]["records_relabelled"] == len(records)
    assert max(len(r.negatives) for r in rows) == 4
    if layout == "meta":
        records[0]["meta"]["relabel"] = records[0]["meta"]["relabel"][:-1]  # its last negative was never judged
    else:
        del records[0]["negatives"][-1]["judges"]["relabel"]
    vetted.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    rows, report = _export(data["tmp"], [vetted], f"auto-relabelled-but-one-{layout}", dev_fraction=0, batch_size=8)
    assert report["negatives_per_row"]["chose"] == 1 and all(len(r.negatives) == 1 for r in rows)


HUB_KEYS = ("license", "language", "task_categories", "size_categories", "source_datasets")


def _card(folder: Path):
    from huggingface_hub import DatasetCard

    return DatasetCard((folder / "README.md").read_text(encoding="utf-8"))


@pytest.mark.parametrize("inputs, license, want", [
    (("mined",), None, "cc-by-sa-4.0"),  # a known BEIR collection: its Hub card's licence
    pytest.param(("gen", "mined"), None, "unknown", marks=pytest.mark.bench),  # generated records have none: the export says so
    pytest.param(("gen", "mined"), "cc-by-4.0", "cc-by-4.0", marks=pytest.mark.bench),
])
def test_the_card_passes_the_hubs_metadata_checks_with_no_local_path(data, tmp_path, inputs, license, want):
    """The card's metadata is what the Hub indexes (checked offline as the Hub and ``datasets``
    parse it, values from the Hub's own lists), and nothing in the card or the report names a
    path of this machine: paths are relative to the export folder."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs

    from curate.export.formats.hub import HUB_LICENSES, SIZE_BUCKETS

    out = tmp_path / "cli"
    args = ["export", *(x for i in inputs for x in ("--in", str(data[i]))), "--format", "hf", "--out", str(out)]
    proc = run_curate(*args, *(("--license", license) if license else ()))
    assert proc.returncode == 0, proc.stderr
    meta = _card(out).data.to_dict()
    assert all(meta.get(k) for k in HUB_KEYS), meta
    assert meta["license"] == want and meta["license"] in HUB_LICENSES
    assert meta["language"] == ["en"] and meta["task_categories"] == ["sentence-similarity", "text-retrieval"]
    assert meta["size_categories"] in ([name] for _, name in SIZE_BUCKETS)
    assert meta["source_datasets"] == ["BeIR/scifact"]
    MetadataConfigs.from_dataset_card_data(_card(out).data)  # configs and split names as datasets reads them
    DatasetInfosDict.from_dataset_card_data(_card(out).data)
    said = " ".join((proc.stdout + proc.stderr).split())
    assert ("unknown for generated records; give --license" in said) == (want == "unknown")
    if want == "unknown":
        assert meta["license_missing_for"] == ["generated records"]
    text = (out / "README.md").read_text(encoding="utf-8") + (out / "report.json").read_text(encoding="utf-8")
    assert str(tmp_path) not in text and str(SCIFACT.resolve()) not in text and "/work/" not in text
    sections = re.split(r"^## ", text.split("\n---\n", 1)[1], flags=re.M)[1:]
    assert sections and all(s.split("\n", 1)[1].strip() for s in sections)  # no empty section
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [s["path"] for s in report["sources"]] == [data[i].name for i in inputs]  # far from the export: names
    near = out.parent / "sibling" / "records.jsonl"  # beside the export: relative to it
    near.parent.mkdir()
    near.write_bytes(data["gen"].read_bytes())
    proc = run_curate("export", "--in", str(near), "--format", "hf", "--out", str(out), "--license", "mit")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["sources"][0]["path"] == "../sibling/records.jsonl"


def test_bad_license_or_language_is_one_line(data, tmp_path):
    proc = run_curate("export", "--in", str(data["gen"]), "--out", str(tmp_path / "x"), "--license", "CC BY 4.0")
    assert_one_line_error(proc, "--license 'CC BY 4.0'", "Hub licence id")
    proc = run_curate("export", "--in", str(data["gen"]), "--out", str(tmp_path / "x"), "--language", "english")
    assert_one_line_error(proc, "--language 'english'", "ISO 639")
    assert not (tmp_path / "x").exists()
