"""Each arm's training data, made by the real stages and kept for every seed and later run.

* the training queries: the split's qrels, or a seeded subset of its query ids (``queries``),
  written as a qrels file so that ``curate mine --qrels`` and the baseline read the same ones;
* curate arms: ``curate mine`` (one mined set per distinct set of mine options, shared by
  the arms that only differ after it), an optional ``curate filter`` recipe, then one
  ``curate export`` per seed (the seed shuffles records and batches, as a user's would);
* ``st`` arms: sentence-transformers' ``mine_hard_negatives`` on (query, positive) pairs.
  ``positives: all`` (default) gives it every labelled positive of a query, so it knows them
  all as curate does; ``rows: one`` (default) keeps the row of each query's own positive
  (the most relevant one, as ``curate mine`` picks), so every arm trains on the same pairs.

Every product sits in a folder named by a hash of what made it, written atomically by its
stage, so a killed grid reuses what was finished and redoes only what was not.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from curate.ablate.grid import Arm, Grid
from curate.core.errors import CurateError


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def training_qrels(grid: Grid, work: Path) -> Path:
    """The training queries as a qrels file (all of the split, or the seeded subset)."""
    from curate.datasets.beir import read_qrels

    src = Path(grid.data) / "qrels" / f"{grid.split}.tsv"
    qrels = read_qrels(src)
    qids = sorted(qrels)
    if grid.holdout:
        qids = holdout_split(qids, grid.holdout)[0]
    if grid.queries and grid.queries < len(qids):
        qids = sorted(random.Random(f"ablate:{grid.queries}").sample(qids, grid.queries))
    shown = {q: _shown(qrels[q], grid.shown_positives) for q in qids}
    key = [str(src), qids] + ([grid.shown_positives] if grid.shown_positives else [])
    path = work / "queries" / f"{grid.split}-{digest(key)}.tsv"
    if not path.is_file():
        from curate.core.jsonl import atomic_write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q in qids for d, r in shown[q].items()]
        atomic_write_text(path, "\n".join(lines) + "\n")
    return path


HOLDOUT_SEED = "halves:0"  # the shuffle bench/results' NQ-UTD halves were cut with


def holdout_split(qids: list[str], share: float) -> tuple[list[str], list[str]]:
    """(trained, evaluated): the sorted query ids shuffled once, the last ``share`` of them held out."""
    order = sorted(qids)
    random.Random(HOLDOUT_SEED).shuffle(order)
    cut = len(order) - round(share * len(order))
    return sorted(order[:cut]), sorted(order[cut:])


def holdout_data(grid: Grid, work: Path) -> str:
    """A BEIR folder in ``work`` whose ``eval_split`` qrels hold only the held-out queries (every
    judged line of each, non-relevant ones too); corpus and queries are linked, not copied."""
    from curate.core.jsonl import atomic_write_text
    from curate.datasets.beir import read_qrels

    qrels = read_qrels(Path(grid.data) / "qrels" / f"{grid.split}.tsv")
    held = holdout_split(list(qrels), grid.holdout)[1]
    folder = work / "holdout"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        link = folder / name
        if not link.exists():
            link.symlink_to((Path(grid.data) / name).resolve())
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q in held for d, r in qrels[q].items()]
    atomic_write_text(folder / "qrels" / f"{grid.eval_split}.tsv", "\n".join(lines) + "\n")
    return str(folder)


def _shown(labels: dict[str, int], n: int | None) -> dict[str, int]:
    """A query's labels as the grid shows them: the ``n`` most relevant positives (ties in file
    order), the rest held back, so mining meets them as unlabelled documents (a user's sparse labels)."""
    if n is None:
        return labels
    ranked = sorted((d for d, r in labels.items() if r > 0), key=lambda d: -labels[d])
    return {d: labels[d] for d in ranked[:n]}


def _mine_key(arm: Arm) -> dict[str, Any]:
    """The arm's mine options with defaults filled in: a change of curate's defaults makes a new set."""
    from dataclasses import asdict

    from curate.mine.main import MineOptions

    return {k: v for k, v in asdict(MineOptions(out="", **arm.mine)).items() if k != "out"}


def _mined_folder(grid: Grid, arm: Arm, qrels: Path | None, work: Path) -> Path:
    return work / "mined" / digest({"data": grid.data, "qrels": qrels.name, "mine": _mine_key(arm)})


def recipe_key(name: str) -> dict[str, Any]:
    """A filter recipe by what it does (steps, parameters, teacher), not its name or path: a recipe
    edited in place or a changed shipped default makes a new set, a moved checkout keeps its sets."""
    from curate.filter.recipe import load_recipe

    recipe = load_recipe(name)
    return {"steps": [[s.name, s.params] for s in recipe.steps], "teacher": recipe.teacher}


def _records(grid: Grid, arm: Arm, qrels: Path | None, work: Path) -> tuple[Path, Path | None]:
    """Where the arm's mined records are, and its filtered ones (when it has a recipe)."""
    if arm.generate is not None:
        return _corpus_folders(grid, arm, work)[2], None
    mined = _mined_folder(grid, arm, qrels, work)
    if arm.filter is None:
        return mined, None
    return mined, work / "filtered" / digest({"mined": mined.name, **recipe_key(arm.filter)})


def mined_set(grid: Grid, arm: Arm, qrels: Path | None, work: Path) -> Path:
    """``curate mine`` with the arm's options; one folder per distinct input and options."""
    from curate.mine.main import MineOptions, run_mine

    if arm.generate is not None:
        return corpus_set(grid, arm, work)
    folder, ffolder = _records(grid, arm, qrels, work)
    out = folder / "mined.jsonl"
    if not (folder / "mine_report.json").is_file():
        run_mine(MineOptions(out=str(folder), data=grid.data, split=grid.split, qrels=str(qrels), plots=False,
                             **arm.mine))
    if ffolder is None:
        return out
    from curate.filter.main import FilterOptions, filter_main
    from curate.llm.backend import LLMOptions

    if not (ffolder / "filter_report.json").is_file():
        filter_main(FilterOptions(inp=str(out), out=str(ffolder), recipe=arm.filter,
                                  corpus=str(Path(grid.data) / "corpus.jsonl"), llm=LLMOptions()))
    return ffolder / "filtered.jsonl"


def _corpus_folders(grid: Grid, arm: Arm, work: Path) -> tuple[Path, Path | None, Path]:
    """Where a corpus arm's generated, filtered and mined records go, each named by what made it."""
    generated = work / "generated" / digest({"data": grid.data, "generate": arm.generate})
    filtered = None if arm.filter is None else work / "filtered" / digest({"generated": generated.name,
                                                                           **recipe_key(arm.filter)})
    mined = work / "mined" / digest({"records": (filtered or generated).name, "mine": _mine_key(arm)})
    return generated, filtered, mined


def corpus_set(grid: Grid, arm: Arm, work: Path) -> Path:
    """A corpus arm's records, by the stages a user runs: ``generate --from-corpus`` on ``data``'s
    documents (or the passages' own titles or first sentences), the arm's filter recipe with the
    passages as ``--corpus``, then ``mine --in`` against them. No query of the split is read.
    The LLM's answers are cached beside the grids (``OUT/llm.sqlite``), so a new budget or
    grid reuses them."""
    from curate.core.jsonl import atomic_write_jsonl
    from curate.generate.from_corpus import CORPUS, extracted_records, sample_passages
    from curate.mine.main import MineOptions, run_mine

    gen, filtered, mined = _corpus_folders(grid, arm, work)
    g = arm.generate
    if not (gen / "generated.jsonl").is_file() or not (gen / "done").is_file():
        if g["queries"] == "llm":
            from curate.generate.stage import GenerateOptions, generate_stage
            from curate.llm.backend import LLMOptions

            llm = LLMOptions(base_urls=(g["base_url"],) if g["base_url"] else (), model=g["model"],
                             model_path=g["model_path"], cache=str(work.parent / "llm.sqlite"))
            generate_stage(GenerateOptions(out=str(gen), corpus=grid.data, n=g["passages"], seed=g["seed"],
                                           max_chars=g["max_chars"], llm=llm))
        else:
            from curate.datasets.documents import read_documents
            from curate.taskspec import load_spec

            docs = read_documents(grid.data)
            docs.write_corpus(gen / CORPUS)
            task = load_spec("from-corpus").fixed_tasks[0]
            records = extracted_records(sample_passages(docs, g["passages"], g["seed"]), g["queries"], task)
            atomic_write_jsonl(gen / "generated.jsonl", [r.to_dict() for r in records])
        (gen / "done").touch()
    records, corpus = gen / "generated.jsonl", gen / CORPUS
    if filtered is not None:
        if not (filtered / "filter_report.json").is_file():
            from curate.filter.main import FilterOptions, filter_main
            from curate.llm.backend import LLMOptions

            filter_main(FilterOptions(inp=str(records), out=str(filtered), recipe=arm.filter, corpus=str(corpus),
                                      llm=LLMOptions()))
        records = filtered / "filtered.jsonl"
    if not (mined / "mine_report.json").is_file():
        run_mine(MineOptions(out=str(mined), records=str(records), corpus=str(corpus), plots=False, **arm.mine))
    return mined / "mined.jsonl"


def export_folder(grid: Grid, arm: Arm, records: Path, seed: int, work: Path) -> Path:
    """Where ``curate_export`` keeps the arm's export for one seed (nothing is made here)."""
    from dataclasses import asdict

    from curate.export.main import ExportOptions

    resolved = {k: v for k, v in asdict(ExportOptions(inputs=(), out="", **arm.export)).items()
                if k not in ("inputs", "out")}
    return work / "exports" / digest({"records": str(records), "export": resolved, "seed": seed,
                                      "batch": grid.budget.batch_size})


def records_path(grid: Grid, arm: Arm, qrels: Path | None, work: Path) -> Path:
    """The records file ``mined_set`` makes for the arm (nothing is made here)."""
    mined, filtered = _records(grid, arm, qrels, work)
    return filtered / "filtered.jsonl" if filtered is not None else mined / "mined.jsonl"


def train_files(folder: Path) -> list[str]:
    return sorted(str(p) for p in (folder / "data").glob("train-*.parquet"))


def data_digest(files: list[str]) -> str:
    """What a run trains on, as bytes: two arms whose exports are the same file train the same model."""
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


def curate_export(grid: Grid, arm: Arm, records: Path, seed: int, work: Path) -> Path:
    """``curate export`` (sentence-transformers format, no dev split) of one arm for one seed."""
    from curate.export.main import ExportOptions, run_export

    folder = export_folder(grid, arm, records, seed, work)
    if not (folder / "export_report.json").is_file():
        run_export(ExportOptions(inputs=(str(records),), out=str(folder), formats=("sentence-transformers",),
                                 batch_size=grid.budget.batch_size, dev_fraction=0.0, seed=seed, **arm.export))
    return folder


def st_pairs(grid: Grid, qrels: Path | None, positives: str) -> tuple[list[str], list[str], dict[str, str], list[str]]:
    """(queries, positives) rows for the miner, each query's own positive, and the corpus texts.

    The query's own positive is the one ``curate mine`` makes the record's positive (most
    relevant first, then qrels order), so both kinds of arm train on the same pairs.
    """
    from curate.mine.inputs import load_beir_input

    inp = load_beir_input(grid.data, grid.split, qrels)
    texts = inp.corpus.texts
    queries, docs, own = [], [], {}
    for it in inp.items:
        if it.query in own:  # two ids with one text: one query, as both miners treat it
            continue
        own[it.query] = texts[it.positives[0]]
        for j in it.positives if positives == "all" else it.positives[:1]:
            queries.append(it.query)
            docs.append(texts[j])
    return queries, docs, own, texts


def st_dataset(grid: Grid, arm: Arm, qrels: Path | None, work: Path):
    """sentence-transformers' ``mine_hard_negatives`` for an ``st`` arm, saved once."""
    import datasets
    from sentence_transformers.util import mine_hard_negatives

    opts = {k: v for k, v in arm.st.items() if k not in ("positives", "rows")}
    positives, rows = arm.st.get("positives", "all"), arm.st.get("rows", "one")
    folder = work / "st" / digest({"data": grid.data, "qrels": qrels.name, "st": arm.st})
    if (folder / "dataset_info.json").is_file():
        return datasets.load_from_disk(str(folder))
    from curate.ablate.train import load_student

    queries, docs, own, corpus = st_pairs(grid, qrels, positives)
    student = load_student(grid.student)  # only to mine: a saved set needs no model
    pairs = datasets.Dataset.from_dict({"anchor": queries, "positive": docs})
    mined = mine_hard_negatives(pairs, student, corpus=corpus, output_format="n-tuple", verbose=False,
                                cache_folder=str(work / "st" / "embeddings"), **opts)
    if rows == "one":
        mined = mined.filter(lambda r: own.get(r["anchor"]) == r["positive"])
    if len(mined) == 0:
        raise CurateError(f"arm '{arm.name}': sentence-transformers mined no rows with these options")
    tmp = folder.with_name(folder.name + ".tmp")
    mined.save_to_disk(str(tmp))
    tmp.replace(folder)
    return datasets.load_from_disk(str(folder))
