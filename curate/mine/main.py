"""``curate mine``: read queries and a corpus, mine negatives per teacher, write records and a report.

Outputs in the run folder: ``mined.jsonl`` (one ``Record`` per query, or the input records
with mined negatives appended), ``report.json`` and PNG histograms of the scores.
"""

from __future__ import annotations

import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_jsonl
from curate.core.params import range_problem
from curate.core.runner import REJECTED
from curate.core.stage import REPORT, STAGES, FunnelRow, Stage
from curate.mine import report as rep
from curate.mine.ensemble import ENSEMBLES, Pick, assign_cross, interleave
from curate.negatives.sharded import ShardedIndex, build_index
from curate.mine.inputs import DATASET_KINDS, MineInput, MineItem, load_input, written_from_passage
from curate.negatives.knobs import Knobs
from curate.negatives.presets import Method
from curate.mine.miner import CrossEncoderScorer, MineConfig, Mined, mine
from curate.mine.options import DEFAULT_TASK, MineOptions, SearchSettings
from curate.mine.sampling import STRATEGIES
from curate.core.records import Negative, Positive, Record, TeacherScores

MINED = "mined.jsonl"
PROMOTE_ONE_TEACHER = "--promote-top takes one --teacher: the teacher that mines a query picks its positive"
HYBRID_ONE_TEACHER = ("--scores hybrid mixes BM25 with one teacher's cosine: give one --teacher and no "
                      "--cross-encoder (its scores are a stronger teacher already)")


def mine_config(opts: MineOptions) -> MineConfig:
    from curate.negatives.presets import load_preset_module

    for path in opts.preset_modules:
        load_preset_module(path)
    method = Method.make(opts.method, **{f.name: getattr(opts, f.name) for f in fields(Knobs)})
    for f in fields(MineOptions):  # the ranges the fields declare, as the CLI's option types read them
        problem = range_problem(f.metadata, getattr(opts, f.name))
        if problem:
            flag = "-k" if f.name == "k" else f"--{f.name.replace('_', '-')}"
            raise CurateError(f"{flag} {getattr(opts, f.name)} {problem}")
    if opts.scores == "hybrid" and (len(opts.teachers) > 1 or opts.cross_encoder):  # before any run opens
        raise CurateError(HYBRID_ONE_TEACHER)
    if opts.promote_top is not None and len(opts.teachers) > 1:
        raise CurateError(PROMOTE_ONE_TEACHER)
    if opts.positive_choice not in ("first", "teacher"):
        raise CurateError(f"--positive-choice {opts.positive_choice!r}: choose first or teacher")
    if opts.anchor not in ("lowest", "record"):
        raise CurateError(f"--anchor {opts.anchor!r}: choose lowest or record")
    if opts.sample not in STRATEGIES:
        raise CurateError(f"unknown --sample {opts.sample!r} (choose from {', '.join(STRATEGIES)})")
    search = {f.name: getattr(opts, f.name) for f in fields(SearchSettings)}
    # the first window must reach the gate's rank, so that every rank it judges is exact
    search.update(pool=max(1, opts.pool), depth=max(opts.depth, opts.positive_top or 0))
    return MineConfig(method=method, **search)


def _teachers(opts: MineOptions):
    from curate.embed.teacher import Teacher

    names = list(opts.teachers) or [None]
    return [Teacher(model=n, query_prompt=opts.query_prompt, doc_prompt=opts.doc_prompt,
                    batch_size=opts.batch_size, executor=opts.executor) for n in names]


def _level(i: int, k: int) -> int:
    return 1 + (i * 4) // max(k, 1)


def _record(item: MineItem, picks: list[Pick], mined_by: dict[int, Mined], inp: MineInput, cfg: MineConfig,
            opts: MineOptions, models: list[str], scorer_name: str | None) -> Record:
    corpus = inp.corpus
    by_teacher = len(mined_by) > 1 or opts.ensemble == "cross"
    negatives = [Negative(text=corpus.texts[p.doc], level=_level(i, cfg.k) if opts.levels else None,
                          teacher_score=float(p.score), source="mined", doc_id=corpus.doc_id(p.doc),
                          title=corpus.title(p.doc), mine_rank=int(p.rank),
                          mined_by=models[p.teacher] if by_teacher else None)
                 for i, p in enumerate(picks)]
    first_t = min(mined_by)
    first = mined_by[first_t]
    neg_scores = [float(p.score) for p in picks]
    model = scorer_name or (models[first_t] if len(mined_by) == 1 else
                            "intra:" + "+".join(models[t] for t in sorted(mined_by)))
    teacher = TeacherScores(
        model=model, positive=float(first.lowest_positive),
        positive_rank=1 if first.promoted is not None else int(first.positive_rank),
        margin=float(first.lowest_positive - max(neg_scores)) if neg_scores else None,
        pool=len(corpus), positives=[float(s) for s in first.positive_scores], stage="mine",
        retriever=models[first_t] if scorer_name else None,
        teachers={models[t]: {"positive": float(m.lowest_positive)} for t, m in sorted(mined_by.items())}
        if len(mined_by) > 1 else None)
    mine_meta: dict[str, Any] = {
        "method": cfg.method.name, "params": cfg.method.record_params(), "k": cfg.k, "sample": cfg.sample,
        "depth": max(m.depth for m in mined_by.values()),
        "valid": {models[t]: m.valid for t, m in sorted(mined_by.items())} if len(mined_by) > 1 else first.valid,
    }
    reasons = {m.short_reason for m in mined_by.values() if m.short_reason}
    if len(picks) < cfg.k and reasons:
        mine_meta["short_reason"] = "; ".join(sorted(reasons))
    if item.record is not None:
        rec = item.record
        if first.promoted is not None:
            doc, score, rank = first.promoted
            source = Positive(rec.positive, rec.positive_id, rec.positive_title)
            rec.positive, rec.positive_id = corpus.texts[doc], corpus.doc_id(doc)
            rec.positive_title = corpus.title(doc)
            rec.positives = [source, *rec.positives]
            mine_meta["promoted"] = {"source_id": source.doc_id, "source_rank": int(first.positive_rank),
                                     "margin": cfg.promote_top}
        for neg in rec.negatives:  # ranked by the teacher this one replaces
            neg.teacher_rank = None
        rec.negatives = list(rec.negatives) + negatives
        rec.teacher = teacher
        rec.meta = dict(rec.meta or {})
        rec.meta["mine"] = mine_meta
        return rec
    positives = [Positive(corpus.texts[j], corpus.doc_id(j), corpus.title(j)) for j in item.positives]
    meta: dict[str, Any] = {"source": inp.source.get("kind")}
    if item.query_id is not None:
        meta["query_id"] = item.query_id
    meta["mine"] = mine_meta
    return Record(id=item.record_id, task_type=item.task_type or "retrieval", task=item.task or opts.task_text,
                  query=item.query, positive=positives[0].text, positive_id=positives[0].doc_id,
                  positive_title=positives[0].title,
                  positives=positives[1:], negatives=negatives, teacher=teacher, meta=meta)


def _promote(items: list[MineItem], results: list[Mined]) -> None:
    """Make each promoted document its item's first positive (the source passage second), in
    place, so the scores that follow (hybrid, the record's) are the new positive's."""
    for it, res in zip(items, results):
        if res.promoted is not None:
            doc, score, _ = res.promoted
            it.positives.insert(0, doc)
            res.positive_scores = np.concatenate([[score], res.positive_scores])


def _hybrid(inp: MineInput, items: list[MineItem], qvecs, dvecs, results: list[Mined]):
    """Rescore each query's positives and picked negatives with BM25 mixed into the teacher's cosine
    (``curate.negatives.hybrid``), in place; the picks and their order stay the teacher's.

    BM25's weight is chosen as if nothing had been promoted: a promoted positive (``_promote``) is
    scored as one of the picks, so it competes with the source passage instead of standing in for
    it. It is the dense teacher's own favourite, so judging the weight by it would always favour the
    dense teacher alone (weight 0: no BM25 at all)."""
    from curate.negatives.hybrid import hybrid_scores

    selves = [inp.corpus.find_text(it.query) for it in items]
    lifted = [int(res.promoted is not None) for res in results]  # then it.positives[0] is the promoted document
    own = [list(it.positives)[up:] + list(it.also_positive) for it, up in zip(items, lifted)]
    picks = [list(res.docs) + list(it.positives)[:up] for it, res, up in zip(items, results, lifted)]
    hybrid = hybrid_scores(inp.corpus.texts, [it.query for it in items], qvecs, dvecs, own, picks,
                           left_out=[[] if j is None else [j] for j in selves])
    for it, res, pos, picked, up in zip(items, results, hybrid.positives, hybrid.picked, lifted):
        pos = np.concatenate([picked[len(picked) - up:], pos])  # the promoted document's score first again
        res.scores = picked[:len(picked) - up]
        res.positive_scores = pos[:len(it.positives)]
        res.lowest_positive = float(np.min(pos))
    return hybrid


def check(opts: MineOptions) -> None:
    """The options' own faults, found before anything starts (a deprecated knob's note is the
    run's to print, once)."""
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):
        mine_config(opts)
    if opts.ensemble is not None and opts.ensemble not in ENSEMBLES:
        raise CurateError(f"unknown --ensemble {opts.ensemble!r} (choose from {', '.join(ENSEMBLES)})")
    if len(opts.teachers) > 1 and opts.ensemble is None:
        raise CurateError("several --teacher need --ensemble intra or --ensemble cross")
    from curate.embed.teacher import check_teachers

    check_teachers(opts.teachers)


def mine_stage(opts: MineOptions, run, teachers=None, rescorer=None) -> dict[str, Any]:
    """Mine into ``run``'s folder and return the report.  ``teachers`` / ``rescorer``: objects to
    use instead of loading them by name (tests, notebooks)."""
    if teachers is not None and len(teachers) > 1 and opts.ensemble is None:
        raise CurateError("several --teacher need --ensemble intra or --ensemble cross")
    report = _mine(opts, mine_config(opts), run, teachers, rescorer)
    run.counts.update({"queries_in": report["queries_in"], "records_out": report["queries_out"],
                       "negatives": report["negatives"]})
    return report


def run_mine(opts: MineOptions, teachers=None, rescorer=None) -> dict[str, Any]:
    """Mine through the stage runner (as ``curate mine`` does, printing nothing) and return the report."""
    from curate.core.stage import run_stage

    return run_stage(STAGE, opts, quiet=True, teachers=teachers, rescorer=rescorer)[0]


def _mine(opts: MineOptions, cfg: MineConfig, run, teachers, rescorer) -> dict[str, Any]:
    started = time.perf_counter()
    timings: dict[str, float] = {}
    check_qrels = None
    if opts.check_qrels:
        from curate.datasets.beir import read_qrels

        check_qrels = read_qrels(Path(opts.check_qrels))
    out_dir = run.dir

    t = time.perf_counter()
    inp = load_input(data=opts.data, split=opts.split, qrels=opts.qrels, min_relevance=opts.min_relevance,
                     pairs=opts.pairs, records=opts.records, hf=opts.hf, hf_split=opts.hf_split,
                     hf_config=opts.hf_config, query_column=opts.query_column,
                     positive_column=opts.positive_column, id_column=opts.id_column, corpus=opts.corpus)
    items = inp.items[:opts.limit] if opts.limit else inp.items
    if not items:
        raise CurateError("no queries to mine")
    for item_id, reason, detail in inp.rejected:
        run.reject(item_id, reason, **detail)
    timings["load_s"] = time.perf_counter() - t

    teachers = teachers if teachers is not None else _teachers(opts)
    models = [tc.model_id for tc in teachers]
    if len(set(models)) != len(models):
        raise CurateError("the same teacher is named twice")
    if opts.scores == "hybrid" and (len(teachers) > 1 or rescorer is not None):
        raise CurateError(HYBRID_ONE_TEACHER)
    if opts.promote_top is not None and len(teachers) > 1:
        raise CurateError(PROMOTE_ONE_TEACHER)
    if rescorer is None and opts.cross_encoder:
        rescorer = CrossEncoderScorer(opts.cross_encoder, inp.corpus.texts)
    scorer_name = getattr(rescorer, "name", "cross-encoder") if rescorer is not None else None
    owner = (assign_cross([it.key for it in items], len(teachers), opts.seed, opts.cross_assign)
             if opts.ensemble == "cross" else None)

    per_item: list[dict[int, Mined]] = [{} for _ in items]
    hybrid = None  # BM25 mixed into the teacher's scores (--scores hybrid)
    teacher_rows = []
    index_info = None
    encode_s = search_s = 0.0
    for ti, teacher in enumerate(teachers):
        mine_idx = [i for i in range(len(items)) if owner is None or owner[i] == ti]
        if not mine_idx:
            teacher_rows.append({"model": models[ti], "queries": 0})
            continue
        t = time.perf_counter()
        before = (teacher.encoded, teacher.cache_hits)
        dvecs = teacher.encode_docs(inp.corpus.texts)
        qvecs = teacher.encode_queries([items[i].query for i in mine_idx])
        encode_s += time.perf_counter() - t
        t = time.perf_counter()
        index = build_index(dvecs, opts.index, opts.executor, nprobe=opts.nprobe, ef_search=opts.ef_search)
        index_info = index.describe()
        try:
            results = mine(qvecs, dvecs, index, [items[i] for i in mine_idx], cfg, rescorer)
        finally:
            if isinstance(index, ShardedIndex):
                index.close()
        search_s += time.perf_counter() - t
        _promote([items[i] for i in mine_idx], results)
        if opts.scores == "hybrid":
            t = time.perf_counter()
            hybrid = _hybrid(inp, [items[i] for i in mine_idx], qvecs, dvecs, results)
            scorer_name = f"{hybrid.name} + {models[ti]}"
            timings["hybrid_s"] = time.perf_counter() - t
        for i, res in zip(mine_idx, results):
            per_item[i][ti] = res
        teacher_rows.append({"model": models[ti], "queries": len(mine_idx),
                             "texts_encoded": teacher.encoded - before[0],
                             "cache_hits": teacher.cache_hits - before[1],
                             "queries_searched_deeper": sum(r.rounds > 1 for r in results),
                             "max_depth_searched": max(r.depth for r in results)})
        del dvecs, qvecs, index
    timings["encode_s"] = encode_s
    timings["search_s"] = search_s
    for teacher in teachers:  # encoding is over: free any encoding workers
        getattr(teacher, "close", lambda: None)()

    t = time.perf_counter()
    min_negs = opts.min_negatives if opts.min_negatives is not None else (0 if opts.records else 1)
    out_records, all_picks, short_reasons = [], [], []
    lowest_pos, neg_scores, gaps = [], [], []
    first_ranks, pos_ranks, kept_ranks = [], [], []  # where the kept negatives sit (rep.negative_ranks)
    anchored_lower: list[bool] = []  # ... and whether a lower labelled positive set their threshold
    rejected: dict[str, int] = {}
    gated = 0
    for item, mined_by in zip(items, per_item):
        lists = {tt: [Pick(tt, int(d), float(s), int(r)) for d, s, r in zip(m.docs, m.scores, m.ranks)]
                 for tt, m in mined_by.items()}
        if len(lists) == 1:
            picks = next(iter(lists.values()))
        else:
            picks = interleave([lists[tt] for tt in sorted(lists)], cfg.k, opts.ensemble_dedup)
        all_picks.append([p.doc for p in picks])
        reasons = sorted({m.short_reason for m in mined_by.values() if m.short_reason})
        short_reasons.append("; ".join(reasons) if len(picks) < cfg.k and reasons else
                             ("not enough valid candidates" if len(picks) < cfg.k else None))
        for m in mined_by.values():
            for name, c in m.rejected.items():
                rejected[name] = rejected.get(name, 0) + c
        first = mined_by[min(mined_by)]
        lowest_pos.append(first.lowest_positive)
        for p in picks:
            neg_scores.append(p.score)
            gaps.append(mined_by[p.teacher].lowest_positive - p.score)
        if opts.positive_top and first.positive_rank > opts.positive_top:
            gated += 1
            run.reject(item.record_id, "positive-below-top", query=item.query, positive_rank=int(first.positive_rank),
                       positive_top=opts.positive_top)
        elif len(picks) >= min_negs:
            out_records.append(_record(item, picks, mined_by, inp, cfg, opts, models, scorer_name))
            if picks:
                first_ranks.append(min(p.rank for p in picks))
                pos_ranks.append(first.positive_rank)
                anchored_lower.append(cfg.anchor == "lowest" and first.promoted is None
                                      and len(first.positive_scores) > 0
                                      and first.lowest_positive < float(first.positive_scores[0]))
                kept_ranks.extend(p.rank for p in picks)
        else:
            run.reject(item.record_id, "too-few-negatives", query=item.query, negatives=len(picks),
                       min_negatives=min_negs, why=short_reasons[-1])
    atomic_write_jsonl(out_dir / MINED, (r.to_dict() for r in out_records))

    report: dict[str, Any] = {
        "input": inp.source,
        "skipped_input": inp.skipped,
        "corpus": {"documents": len(inp.corpus), "duplicate_texts_merged": inp.corpus.duplicates,
                   "positives_added": inp.corpus.added, "blank_documents_left_out": len(inp.corpus.blank_ids)},
        "method": {"name": cfg.method.name, **cfg.method.params()},
        "k": cfg.k,
        "sampling": {"strategy": cfg.sample, **({"pool": cfg.pool, "temperature": cfg.temperature,
                                                "seed": cfg.seed} if cfg.sample != "top" else {})},
        "search": {"depth": cfg.depth, "max_depth": cfg.max_depth, "index": index_info},
        "teachers": teacher_rows,
        "ensemble": ({"method": opts.ensemble, "dedup": opts.ensemble_dedup if opts.ensemble == "intra" else None,
                      "assign": opts.cross_assign if opts.ensemble == "cross" else None}
                     if opts.ensemble else None),
        "cross_encoder": ({"model": scorer_name, "pairs_scored": getattr(rescorer, "pairs_scored", None)}
                          if rescorer is not None else None),
        "scores_from": {"kind": opts.scores, **(hybrid.describe() if hybrid is not None else {})},
        **rep.counts(cfg.k, [len(p) for p in all_picks], short_reasons, len(out_records)),
        "min_negatives": min_negs,
        "positive_gate": {"positive_top": opts.positive_top or None, "queries_dropped": gated,
                          "positive_rank": rep.rank_summary([m[min(m)].positive_rank for m in per_item])},
        "rejected_candidates": rejected,
        **({"positive_promoted": {"margin": opts.promote_top, "eligible": sum(map(written_from_passage, items)),
                                  "queries": sum(1 for m in per_item if m and m[min(m)].promoted is not None)}}
           if opts.promote_top is not None else {}),
        "scores": rep.score_summary(lowest_pos, neg_scores, gaps),
        "negative_ranks": rep.negative_ranks(
            first_ranks, pos_ranks, kept_ranks, max(cfg.depth, cfg.method.last_useful_rank() or 0),
            max((r.get("max_depth_searched", 0) for r in teacher_rows), default=0), len(inp.corpus),
            anchored_lower),
    }
    if check_qrels is not None:
        report["false_negatives"] = rep.false_negative_rate(items, all_picks, inp.corpus, check_qrels,
                                                            opts.check_qrels)
    plots = rep.write_plots(out_dir, lowest_pos, neg_scores, gaps, cfg.method.name) if opts.plots else []
    report["plots"] = [p.name for p in plots]
    report["outputs"] = {"records": MINED, **({"rejected": REJECTED} if run.dropped else {})}
    timings["write_s"] = time.perf_counter() - t
    report["timings"] = {k: round(v, 2) for k, v in timings.items()}
    report["wall_seconds"] = round(time.perf_counter() - started, 2)
    return report


def summary(report: dict[str, Any], out: Path) -> list[str]:
    """What a run mined, where it fell short, and where it wrote."""
    lines = []
    neg = report["negatives_per_query"]["mean"]
    lines.append(f"mine ({report['method']['name']}): {report['queries_out']}/{report['queries_in']} queries "
                  f"written, {report['negatives']} negatives ({neg:.2f} per query), "
                  f"{report['queries_short']} with fewer than {report['k']}")
    for reason, n in report["short_reasons"].items():
        lines.append(f"  short: {reason}: {n}")
    for line in (rep.rank_line(report.get("negative_ranks") or {}),
                 rep.far_below_warning(report.get("negative_ranks") or {})):
        if line:
            lines.append(line)
    mix = report.get("scores_from") or {}
    if mix.get("kind") == "hybrid":  # say what the mix is: a weight of 0 leaves BM25 out altogether
        w, mrr = mix["weight"], mix["mrr_by_weight"]
        lines.append(f"  scores: BM25 mixed in at weight {w:g}, where the queries' own positives rank best "
                     f"(MRR {mrr[f'{w:g}']:.3f}; the teacher alone {mrr['0']:.3f})" if w else
                     "  scores: BM25 ranked the queries' own positives no better at any weight: the scores are "
                     "the teacher's cosine alone")
    blank = (report.get("corpus") or {}).get("blank_documents_left_out")
    if blank:
        lines.append(f"  {blank} corpus document{'s' if blank != 1 else ''} with no text left out of the pool")
    promoted = report.get("positive_promoted")
    if promoted and not promoted["eligible"]:
        lines.append("  --promote-top acted on no query: it applies to queries an LLM wrote from a passage "
                     "(records with meta.passage, as generate --from-corpus writes them)")
    elif promoted:
        lines.append(f"  positive promoted on {promoted['queries']} of {promoted['eligible']} queries written from a "
                     f"passage: the teacher's first document outscored the source by more than "
                     f"{promoted['margin']:g} (the source stays a positive)")
    gate = report["positive_gate"]
    if gate["queries_dropped"]:
        lines.append(f"  dropped {gate['queries_dropped']}: positive ranked below {gate['positive_top']} by the teacher")
    fn = report.get("false_negatives")
    if fn and fn["rate"] is not None:
        lines.append(f"false negatives against {fn['qrels']}: {fn['false_negatives']}/{fn['negatives_checked']} "
                      f"= {fn['rate']:.2%} ({fn['queries_checked']} queries checked)")
    for t in report["teachers"]:
        if t.get("queries"):
            lines.append(f"teacher {t['model']}: {t['texts_encoded']} texts encoded, {t['cache_hits']} from cache")
    extra = ", rejected.jsonl" if "rejected" in report["outputs"] else ""
    lines.append(f"wrote {out / MINED}, {REPORT}{extra} and run.json in {report['wall_seconds']:.1f}s")
    return lines


def details(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The report page's rows: where the kept negatives sit in the teacher's ranking, and the
    warning the terminal gives when most of them are far below their positive."""
    ranks = report.get("negative_ranks") or {}
    rows = [("negatives' ranks", rep.rank_line(ranks) or "no negatives kept")]
    warning = rep.far_below_warning(ranks)
    if warning:
        rows.append(("warning", warning.removeprefix("warning: ")))
    blank = (report.get("corpus") or {}).get("blank_documents_left_out")
    if blank:
        rows.append(("blank documents", f"{blank} left out of the pool"))
    return rows


def funnel(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    return {"records_in": report["queries_in"], "records": report["queries_out"], "negatives": report["negatives"],
            "negatives_per_record": report["negatives_per_query"]["mean"],
            "plots": [str(folder / p) for p in report.get("plots", [])]}


def present(m: dict[str, Any]) -> FunnelRow:
    return FunnelRow(lines=[("mine", f"{m['records']} of {m['records_in']} records mined, {m['negatives']} negatives "
                                     f"({m['negatives_per_record']:.2f} per record)")],
                     cells=[("records in", "records_in"), ("records mined", "records"), ("negatives", "negatives")])


def provenance(rep: dict[str, Any]) -> dict[str, Any]:
    """What an export's card records of a mine run: its input, method, teachers and counts, and
    the short name of the dataset (a BEIR folder, a file, a hub set) its queries came from."""
    src = rep.get("input") or {}
    name = src.get("name") or src.get("path")
    return {
        "input": rep.get("input"), "method": rep.get("method"), "k": rep.get("k"),
        "sampling": rep.get("sampling"), "teachers": [t.get("model") for t in rep.get("teachers") or []],
        "queries_in": rep.get("queries_in"), "queries_out": rep.get("queries_out"),
        "negatives": rep.get("negatives"), "false_negatives": rep.get("false_negatives"),
        # what the records' scores are, where not the teacher's cosine (mine --scores hybrid)
        **({"scores": rep["scores_from"]} if (rep.get("scores_from") or {}).get("kind") not in (None, "teacher")
           else {}),
        "dataset": (Path(str(name)).name or str(name)) if name and src.get("kind") != "records" else None,
    }


STAGE = Stage("mine", MineOptions, mine_stage, check=check, reads=("data", "qrels", "pairs", "records", "corpus", "check_qrels",
                                               "preset_modules"),
              writes={"records": MINED, "drops": REJECTED}, summary=summary, funnel=funnel,
              present=present, provenance=provenance, details=details, dataset_sources=DATASET_KINDS,
              needs=("query", "positive"), adds=("negatives", "teacher"))
STAGES.register(STAGE.name, STAGE)
