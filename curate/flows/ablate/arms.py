"""Each arm's training data, made by the real stages and kept for every seed and later run.

* the training queries: the split's qrels, or a seeded subset of its query ids (``queries``),
  written as a qrels file so that mining and the baseline read the same ones;
* curate arms: a list of stages (``arm_stages``), each with its options, run one after the
  other through the one stage runner (``curate.core.stage.run_stage``): ``mine`` on the
  split's queries, then the arm's ``filter`` recipe if it has one; or, for an arm that starts
  from the corpus, ``generate`` (or ``extract``, the queries taken from the passages
  themselves, no LLM), the optional ``filter``, then ``mine`` against the same passages. Then
  one ``export`` per seed (the seed shuffles records and batches, as a user's would). Each
  stage reads the one before it through the contract (``Stage.path``), never by file name;
* ``st`` arms: sentence-transformers' ``mine_hard_negatives`` on (query, positive) pairs.
  ``positives: all`` (default) gives it every labelled positive of a query, so it knows them
  all as curate does; ``rows: one`` (default) keeps the row of each query's own positive
  (the most relevant one, as ``curate mine`` picks), so every arm trains on the same pairs.

Every stage runs in a folder named by a hash of the options that made it (shared by the arms
that only differ after it), and the runner skips a folder whose finished run has the same
fingerprint (options and input bytes), so a killed grid reuses what was finished and redoes
only what was not.
"""

from __future__ import annotations

import functools
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from curate.flows.ablate.grid import PAIRS, Arm, Grid
from curate.core.errors import CurateError
from curate.core.hashing import file_digest, value_digest
from curate.core.stage import STAGES, Stage, run_stage

KEY = 12  # characters of a key (``value_digest``): a stage's folder, a run's result, a grid


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
    path = work / "queries" / f"{grid.split}-{value_digest(key, length=KEY)}.tsv"
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
    from curate.datasets.beir import read_qrels

    qrels = read_qrels(Path(grid.data) / "qrels" / f"{grid.split}.tsv")
    held = holdout_split(list(qrels), grid.holdout)[1]
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q in held for d, r in qrels[q].items()]
    return _beir_view(work / "holdout", grid.data, grid.eval_split, "\n".join(lines) + "\n")


def pairs_data(grid: Grid, qrels: Path, work: Path) -> str:
    """A BEIR folder whose ``split`` qrels are the training queries (``training_qrels``), so
    ``generate --from-pairs`` reads the same (query, positive) pairs mining would."""
    return _beir_view(work / "pairs" / qrels.stem, grid.data, grid.split, qrels.read_text())


def _beir_view(folder: Path, data: str, split: str, qrels_text: str) -> str:
    """``data``'s corpus and queries (linked, not copied) with ``qrels_text`` as ``split``'s qrels."""
    from curate.core.jsonl import atomic_write_text

    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        link = folder / name
        if not link.exists():
            link.symlink_to((Path(data) / name).resolve())
    target = folder / "qrels" / f"{split}.tsv"
    if not target.is_file() or target.read_text() != qrels_text:
        atomic_write_text(target, qrels_text)
    return str(folder)


def _shown(labels: dict[str, int], n: int | None) -> dict[str, int]:
    """A query's labels as the grid shows them: the ``n`` most relevant positives (ties in file
    order), the rest held back, so mining meets them as unlabelled documents (a user's sparse labels)."""
    if n is None:
        return labels
    ranked = sorted((d for d, r in labels.items() if r > 0), key=lambda d: -labels[d])
    return {d: labels[d] for d in ranked[:n]}


def _mine_key(arm: Arm) -> dict[str, Any]:
    """The arm's mine options with defaults filled in: a change of curate's defaults makes a new set.
    The knobs named after sentence-transformers' (relative_margin, ...) and ``scores`` are left out
    while at their defaults, so the sets mined before they were added keep their folders."""
    from curate.mine.main import MineOptions

    added = {"relative_margin": None, "absolute_margin": None, "range_min": None, "range_max": None,
             "scores": "teacher"}
    return {k: v for k, v in asdict(MineOptions(out="", **arm.mine)).items()
            if k != "out" and not (k in added and v == added[k])}


def recipe_key(name: str) -> dict[str, Any]:
    """A filter recipe by what it does (steps, parameters, teacher), not its name or path: a recipe
    edited in place or a changed shipped default makes a new set, a moved checkout keeps its sets."""
    from curate.filter.recipe import load_recipe

    recipe = load_recipe(name)
    return {"steps": [[s.name, s.params] for s in recipe.steps], "teacher": recipe.teacher}


# ----------------------------------------------------------------------------- extracted queries


@dataclass(kw_only=True)
class ExtractOptions:
    """A corpus arm with no LLM: each sampled passage's own title or first sentence as its query."""

    out: str
    corpus: str  # the documents (the grid's BEIR folder)
    n: int  # passages sampled
    seed: int = 0
    queries: str = "title"  # or "first-sentence"


def run_extract(opts: ExtractOptions, run) -> dict[str, Any]:
    """Sample the passages, write them as the corpus and a record per passage whose query is
    taken from it, shaped as ``generate --from-corpus`` writes them, so the same stages read them."""
    from curate.core.jsonl import atomic_write_jsonl
    from curate.datasets.documents import read_documents
    from curate.generate.from_corpus import extracted_records, sample_passages
    from curate.llm.taskspec import load_spec

    stage = extract_stage()
    docs = read_documents(opts.corpus)
    docs.write_corpus(stage.path(run.dir, "corpus"))
    task = load_spec("from-corpus").fixed_tasks[0]
    passages = sample_passages(docs, opts.n, opts.seed)
    records = extracted_records(passages, opts.queries, task)
    atomic_write_jsonl(stage.path(run.dir), [r.to_dict() for r in records])
    report = {"queries_from": opts.queries, "passages": len(passages), "records": len(records)}
    run.counts.update(report)
    return report


@functools.cache
def extract_stage() -> Stage:
    """The extracted-queries stage: its folder holds what a generate run's does (records and
    corpus, under the same names), but its marker names this stage, so it is never taken for a
    finished generate run (nor one for it)."""
    generate = STAGES.get("generate")
    return Stage("extract", ExtractOptions, run_extract, reads=("corpus",),
                 writes={role: generate.writes[role] for role in ("records", "corpus")})


# ----------------------------------------------------------------------------- an arm's stages


def arm_stages(grid: Grid, arm: Arm, qrels: Path | None, work: Path) -> list[tuple[Stage, Any]]:
    """The stages that make a curate arm's records, in order, each with its options (its folder is
    ``opts.out``, named by what made it); the last one's product is what the arm exports.

    From the split's queries: ``mine`` (one set per distinct input and options), then the arm's
    ``filter`` recipe. From the corpus: ``generate`` (``extract`` without an LLM), the recipe
    with the passages as its corpus, then ``mine`` against the same passages; no query of the
    split is read. With ``queries: pairs``: ``generate --from-pairs`` on the training queries, the
    recipe and mining against ``data``'s corpus (no mining with ``mine: false``). The LLM's answers
    are cached beside the grids (``OUT/llm.sqlite``), so a new budget or grid reuses them."""
    from curate.llm.options import LLMOptions

    FILTER, MINE = STAGES.get("filter"), STAGES.get("mine")
    FilterOptions, MineOptions = FILTER.options, MINE.options
    if arm.generate is None:
        mined = work / "mined" / value_digest({"data": grid.data, "qrels": qrels.name, "mine": _mine_key(arm)},
                                              length=KEY)
        steps: list[tuple[Stage, Any]] = [(MINE, _options(MineOptions, arm.mine, out=str(mined), data=grid.data,
                                                          split=grid.split, qrels=str(qrels), plots=False))]
        if arm.filter is not None:
            filtered = work / "filtered" / value_digest({"mined": mined.name, **recipe_key(arm.filter)}, length=KEY)
            steps.append((FILTER, FilterOptions(inp=str(MINE.path(mined)), out=str(filtered), recipe=arm.filter,
                                                corpus=str(Path(grid.data) / "corpus.jsonl"), llm=LLMOptions())))
        return steps
    source, source_opts = _source(grid, arm, qrels, work)
    generated = Path(source_opts.out)
    from_pairs = arm.generate["queries"] == PAIRS  # real pairs: their documents are data's corpus
    corpus = str(Path(grid.data) / "corpus.jsonl" if from_pairs else source.path(generated, "corpus"))
    steps = [(source, source_opts)]
    if arm.filter is not None:
        filtered = work / "filtered" / value_digest({"generated": generated.name, **recipe_key(arm.filter)},
                                                    length=KEY)
        steps.append((FILTER, FilterOptions(inp=str(source.path(generated)), out=str(filtered), recipe=arm.filter,
                                            corpus=corpus, llm=LLMOptions())))
    if not arm.mined:
        return steps
    last, last_opts = steps[-1]
    mined = work / "mined" / value_digest({"records": Path(last_opts.out).name, "mine": _mine_key(arm)}, length=KEY)
    steps.append((MINE, _options(MineOptions, arm.mine, out=str(mined), records=str(last.path(last_opts.out)),
                                 corpus=corpus, plots=False)))
    return steps


def _options(options: type, given: dict[str, Any], **fixed: Any) -> Any:
    """A stage's options: the arm's, with what the grid sets itself on top (an arm never sets those,
    but one read back from a finished run's options names every field)."""
    return options(**{**given, **fixed})


def _source(grid: Grid, arm: Arm, qrels: Path | None, work: Path) -> tuple[Stage, Any]:
    """A generate arm's first stage: ``generate --from-corpus`` on ``data``'s documents, or, with
    ``queries: title`` / ``first-sentence``, the passages' own titles or first sentences, or, with
    ``queries: pairs``, ``generate --from-pairs`` on the training queries."""
    g = arm.generate
    key = {"data": grid.data, "generate": g, **({"qrels": qrels.name} if g["queries"] == PAIRS else {})}
    folder = str(work / "generated" / value_digest(key, length=KEY))
    if g["queries"] not in ("llm", PAIRS):
        return extract_stage(), ExtractOptions(out=folder, corpus=grid.data, n=g["passages"], seed=g["seed"],
                                               queries=g["queries"])
    from curate.llm.options import LLMOptions

    GENERATE = STAGES.get("generate")
    llm = LLMOptions(base_urls=(g["base_url"],) if g["base_url"] else (), model=g["model"],
                     model_path=g["model_path"], cache=str(work.parent / "llm.sqlite"))
    source = ({"pairs": pairs_data(grid, qrels, work), "split": grid.split} if g["queries"] == PAIRS
              else {"corpus": grid.data, "n": g["passages"]})
    if g.get("copy_retries") is not None:
        source["copy_retries"] = g["copy_retries"]
    if g.get("task"):
        source["tasks"] = (g["task"],)
    return GENERATE, GENERATE.options(out=folder, seed=g["seed"], max_chars=g["max_chars"], llm=llm, **source)


def arm_records(grid: Grid, arm: Arm, qrels: Path | None, work: Path) -> Path:
    """Run (or find done) the arm's stages; the records it exports."""
    steps = arm_stages(grid, arm, qrels, work)
    for stage, opts in steps:
        run_stage(stage, opts, resume=True, quiet=True)
    return records_path(grid, arm, qrels, work, steps)


def records_path(grid: Grid, arm: Arm, qrels: Path | None, work: Path,
                 steps: list[tuple[Stage, Any]] | None = None) -> Path:
    """The records ``arm_records`` makes for the arm: the last stage's product (nothing is made here)."""
    stage, opts = (steps or arm_stages(grid, arm, qrels, work))[-1]
    return stage.path(opts.out)


# ----------------------------------------------------------------------------- the export, per seed

FORMAT = "sentence-transformers"  # what the runs train on


def export_step(grid: Grid, arm: Arm, records: Path, seed: int, work: Path) -> tuple[Stage, Any]:
    """``export`` of the arm's records for one seed (no dev split), in a folder named by the
    export options with every default filled in."""
    EXPORT = STAGES.get("export")
    ExportOptions = EXPORT.options
    resolved = {k: v for k, v in asdict(ExportOptions(inputs=(), out="", **arm.export)).items()
                if k not in ("inputs", "out")}
    folder = work / "exports" / value_digest({"records": str(records), "export": resolved, "seed": seed,
                                              "batch": grid.budget.batch_size}, length=KEY)
    return EXPORT, _options(ExportOptions, arm.export, inputs=(str(records),), out=str(folder), formats=(FORMAT,),
                            batch_size=grid.budget.batch_size, dev_fraction=0.0, seed=seed)


def export_folder(grid: Grid, arm: Arm, records: Path, seed: int, work: Path) -> Path:
    """Where ``curate_export`` keeps the arm's export for one seed (nothing is made here)."""
    return Path(export_step(grid, arm, records, seed, work)[1].out)


def curate_export(grid: Grid, arm: Arm, records: Path, seed: int, work: Path) -> Path:
    """Run (or find done) the arm's export for one seed; its folder."""
    stage, opts = export_step(grid, arm, records, seed, work)
    run_stage(stage, opts, resume=True, quiet=True)
    return Path(opts.out)


def train_files(folder: Path) -> list[str]:
    """The training split's Parquet files of an export, as its report lists them (none: no
    finished export there)."""
    from curate.export.main import written_files

    return sorted(str(f) for f in written_files(folder, FORMAT) if f.name.startswith("train-") and f.suffix == ".parquet")


def data_digest(files: list[str]) -> str:
    """What a run trains on, as bytes: two arms whose exports are the same file train the same
    model. One file (the usual export) is keyed by its SHA-256, as results have recorded it."""
    if len(files) == 1:
        return file_digest(files[0])[:16]
    return value_digest([file_digest(f) for f in files], length=16)


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
    folder = work / "st" / value_digest({"data": grid.data, "qrels": qrels.name, "st": arm.st}, length=KEY)
    if (folder / "dataset_info.json").is_file():
        return datasets.load_from_disk(str(folder))
    from curate.train.fit import load_student

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
