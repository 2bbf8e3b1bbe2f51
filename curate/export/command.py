"""The ``curate export`` command (options only; the work is in ``curate.export.main``)."""

from __future__ import annotations

import click


class _PerRow(click.ParamType):
    """A positive count, ``all`` (None: every negative of the record) or ``auto``."""

    name = "N|all|auto"

    def convert(self, value, param, ctx):
        if value is None or (isinstance(value, str) and value.strip().lower() == "all"):
            return None
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            n = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r}: give a count of at least 1, 'all' or 'auto'", param, ctx)
        if n < 1:
            self.fail(f"{value!r}: give a count of at least 1, 'all' or 'auto'", param, ctx)
        return n


@click.command()
@click.option("--in", "inputs", multiple=True, required=True, type=click.Path(dir_okay=False),
              help="Records to export (JSONL from generate, filter, mine or convert); repeatable. "
                   "A record id already read from an earlier --in is skipped.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Export folder (replaced whole when it holds an earlier export).")
@click.option("--format", "formats", multiple=True, default=("sentence-transformers",), show_default=True,
              help="hf, sentence-transformers, flagembedding, tevatron, nemo, nemo-automodel, beir, or all "
                   "(several: one subfolder each); repeatable.")
@click.option("--curriculum", default="none", show_default=True,
              help="none (the record's hardest negatives on every row, see --negatives-per-row), ordered (the "
                   "same, records easy to hard "
                   "in four phases), mgh (phases of level 4, 3, 2, 1 negatives, one per row), reverse "
                   "(1, 2, 3, 4), random (a random level per row) or fixed:N.")
@click.option("--negatives-per-row", type=_PerRow(), default="auto", show_default=True,
              help="Negatives each row carries, its record's hardest first (one of its phase's level under a "
                   "level curriculum); 'all': every negative of the record (with none and ordered); 'auto': "
                   "all where the teacher ranks at least half of the labelled positives in its top 10, "
                   "else 1 (and 1 for records no teacher ranked).")
@click.option("--gap-levels", type=click.Choice(["export", "record"]), default="export", show_default=True,
              help="Levels of mined negatives from the teacher gap: quartiles over the whole export, "
                   "or the gap's rank within each record (every record then has all four levels).")
@click.option("--batch-size", type=int, default=32, show_default=True,
              help="Rows per training batch; the file order is the training order.")
@click.option("--batch-layout", type=click.Choice(["homogeneous", "blended"]), default="homogeneous",
              show_default=True, help="One task per batch (SFR, Linq) or tasks mixed in every batch (NV-Embed).")
@click.option("--task-order", type=click.Choice(["random", "fixed"]), default="random", show_default=True,
              help="fixed: the same task order in every block of batches (Linq's homogeneous task ordering).")
@click.option("--mixed-tail", type=int, default=0, show_default=True,
              help="End training with this many mixed-task batches (Linq's mixed task fine-tuning).")
@click.option("--instruction", default="auto", show_default=True,
              help="Query instruction: auto (e5 when the records hold several tasks, none for one), "
                   "e5 ('Instruct: {task}\\nQuery: {query}'), nv ('{task}: {query}'), "
                   "none, or a Jinja template (or template file) using task and query.")
@click.option("--dev-fraction", type=float, default=0.05, show_default=True,
              help="Share of records held out as dev, whole tasks at a time (0: no dev split).")
@click.option("--decontaminate", multiple=True, metavar="BEIR_DIR[:SPLIT]",
              help="Evaluation set: drop records whose query or positive near-duplicates one of its queries "
                   "or documents (with :SPLIT, that split's queries and their relevant documents); repeatable.")
@click.option("--decontaminate-threshold", type=click.FloatRange(0.0, 1.0), default=0.8, show_default=True,
              help="MinHash Jaccard at or above which a text counts as a copy.")
@click.option("--decontaminate-ngram", type=click.IntRange(1), default=1, show_default=True,
              help="Words per shingle for decontamination (1: word sets, robust for short queries).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every shuffle and draw.")
@click.option("--license", default=None, metavar="ID",
              help="The dataset card's licence (a Hub id such as cc-by-4.0), for data whose sources do not "
                   "give one: generated records, your own documents. Without it such an export's card says "
                   "'unknown' and the export names the sources that lack one.")
@click.option("--language", multiple=True, default=("en",), show_default=True, metavar="CODE",
              help="The dataset card's language (ISO 639 code); repeatable.")
def export(**kw) -> None:
    """Write records as training data: curriculum, batch order, instructions, dev split, formats.

    The order of rows in the files is the training order; keep the trainer from shuffling it.
    """
    from curate.export.main import ExportOptions, run_export

    run_export(ExportOptions(**kw))
