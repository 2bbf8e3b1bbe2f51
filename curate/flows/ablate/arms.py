"""Each cell of a grid (an arm and a seed) as a list of stages, each run through the one stage
runner (``curate.core.stage.run_stage``) in a folder named by its fingerprint
(``curate.core.stage.placed``), so arms that share a stage share its folder and a finished stage
is never run again.

* the training queries: the ``queries`` stage (the split's qrels, a seeded subset, the labels
  each shows), and for a ``holdout`` grid the held-out ones in a ``view`` of the data;
* curate arms: ``mine`` on the split's queries, then the arm's ``filter`` recipe if it has one;
  or, for an arm that starts from the corpus, ``generate`` (or ``extract``, the queries taken
  from the passages themselves, no LLM), the optional ``filter``, then ``mine`` against the
  same passages. Then ``export`` for the seed (it shuffles records and batches, as a user's would);
* ``st`` arms: the ``st`` stage (sentence-transformers' ``mine_hard_negatives``);
* every arm but ``base``: ``fit`` on the rows, then ``eval`` of the model; ``base``: ``eval`` of
  the untrained student.

A step's options are made from the options of the steps before it (their folders), once those
have run: a stage's folder name holds the bytes of what it reads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.flows.ablate.grid import PAIRS, Arm, Grid
from curate.flows.ablate.queries import QRELS, QueriesOptions, ViewOptions, queries_stage, view_stage
from curate.flows.ablate.st import StOptions, st_stage
from curate.core.stage import STAGES, Stage

FORMAT = "sentence-transformers"  # what the runs train on


@dataclass(frozen=True)
class Step:
    """One stage of a cell: its label in the cell, and its options from the placed options of
    the steps before it (by label). ``out`` is left empty: the runner's folder is placed."""

    label: str
    stage: Stage
    options: Callable[[dict[str, Any]], Any]


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


# ----------------------------------------------------------------------------- a cell's stages


def cell_steps(grid: Grid, arm: Arm, seed: int, cache: Path) -> list[Step]:
    """The stages of one arm and seed, in order; the last is ``eval``. ``cache``: where the LLM's
    answers and the baseline miner's embeddings are kept (beside the runs)."""
    steps = _eval_data(grid)
    if arm.kind == "base":
        return steps + [_eval(grid, None, model=grid.student)]
    if arm.kind == "st" or arm.generate is None or arm.generate["queries"] == PAIRS:
        steps.append(_queries(grid))
    if arm.kind == "st":
        steps.append(Step("rows", st_stage(), lambda o: StOptions(
            data=grid.data, qrels=_qrels(o), out="", split=grid.split, student=grid.student, st=arm.st,
            cache=str(cache / "st-embeddings"))))
    else:
        steps += _records(grid, arm, cache)
        steps.append(_export(grid, arm, seed, steps[-1]))
    train = arm.training.changed()
    guide = _guide(grid, arm) if arm.training.loss == "masked" else None
    FIT = STAGES.get("fit")
    steps.append(Step("fit", FIT, lambda o: FIT.options(
        rows=o["rows"].out, out="", base=grid.student, budget=grid.budget, seed=seed,
        in_order=arm.kind != "st", training=train, guide=guide)))
    return steps + [_eval(grid, "fit")]


def _guide(grid: Grid, arm: Arm) -> str | None:
    """The teacher a masked loss consults: the arm's first mining teacher, else the grid's student
    (mining's own default teacher is the bundled MiniLM, the default student too)."""
    teachers = list(arm.mine.get("teachers") or ())
    return teachers[0] if teachers else grid.student


def _qrels(o: dict[str, Any]) -> str:
    return str(Path(o["queries"].out) / QRELS)


def _queries(grid: Grid) -> Step:
    return Step("queries", queries_stage(), lambda o: QueriesOptions(
        source=str(Path(grid.data) / "qrels" / f"{grid.split}.tsv"), out="", queries=grid.queries,
        holdout=grid.holdout, shown_positives=grid.shown_positives))


def _eval_data(grid: Grid) -> list[Step]:
    """A holdout grid evaluates on a view of its split with the held-out queries only."""
    if not grid.holdout:
        return []
    return [Step("held-out", queries_stage(), lambda o: QueriesOptions(
                source=str(Path(grid.data) / "qrels" / f"{grid.split}.tsv"), out="", holdout=grid.holdout,
                held_out=True)),
            Step("eval-data", view_stage(), lambda o: ViewOptions(
                data=grid.data, qrels=str(Path(o["held-out"].out) / QRELS), out="", split=grid.eval_split))]


def eval_data(grid: Grid, placed_opts: dict[str, Any]) -> str:
    return placed_opts["eval-data"].out if "eval-data" in placed_opts else grid.eval_data


def _eval(grid: Grid, fit: str | None, model: str | None = None) -> Step:
    EVAL = STAGES.get("eval")
    return Step("eval", EVAL, lambda o: EVAL.options(
        data=eval_data(grid, o), out="", split=grid.eval_split, model=model,
        fit=o[fit].out if fit else None, light=grid.light, precision=grid.precision))


def _records(grid: Grid, arm: Arm, cache: Path) -> list[Step]:
    """The stages that make a curate arm's records; the last one's product is what it exports.

    From the split's queries: ``mine``, then the arm's ``filter`` recipe. From the corpus:
    ``generate`` (``extract`` without an LLM), the recipe with the passages as its corpus, then
    ``mine`` against the same passages; no query of the split is read. With ``queries: pairs``:
    ``generate --from-pairs`` on the training queries, the recipe and mining against ``data``'s
    corpus (no mining with ``mine: false``)."""
    FILTER, MINE = STAGES.get("filter"), STAGES.get("mine")
    if arm.generate is None:
        steps = [Step("mine", MINE, lambda o: MINE.options(**{**arm.mine, "out": "", "data": grid.data,
                                                                "split": grid.split, "qrels": _qrels(o),
                                                                "plots": False}))]
        corpus: Callable[[dict[str, Any]], str] = lambda o: str(Path(grid.data) / "corpus.jsonl")
    else:
        source = _source(grid, arm, cache)
        steps = [_pairs(grid), source] if arm.generate["queries"] == PAIRS else [source]
        from_pairs = arm.generate["queries"] == PAIRS  # real pairs: their documents are data's corpus
        corpus = ((lambda o: str(Path(grid.data) / "corpus.jsonl")) if from_pairs
                  else (lambda o: str(source.stage.path(o["source"].out, "corpus"))))
    if arm.filter is not None:
        steps.append(Step("filter", FILTER, lambda o, last=steps[-1]: FILTER.options(
            inp=_product(last, o), out="", recipe=arm.filter, corpus=corpus(o))))
    if arm.generate is not None and arm.mined:
        steps.append(Step("mine", MINE, lambda o, last=steps[-1]: MINE.options(**{
            **arm.mine, "out": "", "records": _product(last, o), "corpus": corpus(o), "plots": False})))
    return steps


def _product(step: Step, o: dict[str, Any]) -> str:
    """The records ``step`` wrote, once placed (its stage's product)."""
    return str(step.stage.path(o[step.label].out))


def _pairs(grid: Grid) -> Step:
    """A BEIR view whose split's qrels are the training queries, so ``generate --from-pairs`` reads
    the same (query, positive) pairs mining would."""
    return Step("pairs", view_stage(), lambda o: ViewOptions(data=grid.data, qrels=_qrels(o), out="",
                                                             split=grid.split))


def _source(grid: Grid, arm: Arm, cache: Path) -> Step:
    """A generate arm's first stage: ``generate --from-corpus`` on ``data``'s documents, or, with
    ``queries: title`` / ``first-sentence``, the passages' own titles or first sentences, or, with
    ``queries: pairs``, ``generate --from-pairs`` on the training queries."""
    g = arm.generate
    if g["queries"] not in ("llm", PAIRS):
        return Step("source", extract_stage(), lambda o: ExtractOptions(
            out="", corpus=grid.data, n=g["passages"], seed=g["seed"], queries=g["queries"]))
    from curate.llm.options import LLMOptions

    GENERATE = STAGES.get("generate")

    def options(o: dict[str, Any]) -> Any:
        llm = LLMOptions(base_urls=(g["base_url"],) if g["base_url"] else (), model=g["model"],
                         model_path=g["model_path"], cache=str(cache / "llm.sqlite"))
        source = ({"pairs": o["pairs"].out, "split": grid.split} if g["queries"] == PAIRS
                  else {"corpus": grid.data, "n": g["passages"]})
        if g.get("copy_retries") is not None:
            source["copy_retries"] = g["copy_retries"]
        if g.get("task"):
            source["tasks"] = (g["task"],)
        return GENERATE.options(out="", seed=g["seed"], max_chars=g["max_chars"], llm=llm, **source)

    return Step("source", GENERATE, options)


def _export(grid: Grid, arm: Arm, seed: int, last: Step) -> Step:
    """``export`` of the arm's records (the product of ``last``) for one seed (no dev split)."""
    EXPORT = STAGES.get("export")
    return Step("rows", EXPORT, lambda o: EXPORT.options(**{
        **arm.export, "inputs": (_product(last, o),), "out": "",
        "formats": (FORMAT,), "batch_size": grid.budget.batch_size, "dev_fraction": 0.0, "seed": seed}))
