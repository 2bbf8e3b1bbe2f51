"""The ``curate ablate`` click command (registered in ``curate.cli``); the work is in ``main``."""

from __future__ import annotations

import click

from curate.executor_options import executor_from, executor_options, teacher_url_option


@click.command(name="ablate")
@click.argument("grid", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Folder for the runs, ablate_report.json and ablate.png (re-run to resume).")
@click.option("--seed", "seeds", type=int, multiple=True, help="Seeds to run instead of the grid's (repeatable).")
@click.option("--steps", type=click.IntRange(1), default=None, help="Training steps instead of the grid's budget.")
@click.option("--queries", type=click.IntRange(0), default=None,
              help="Train on this many of the split's queries (a seeded subset, the same for every arm; 0: all).")
@click.option("--max-seq-length", type=click.IntRange(8), default=None,
              help="Tokens per text while training, instead of the grid's budget.")
@click.option("--arm", "arms", multiple=True, help="Run only this arm (repeatable); the report shows all finished.")
@click.option("--light/--full", default=None,
              help="Evaluate on Linq's light set or the full split (default: as the grid says).")
@click.option("--keep-models", is_flag=True, help="Keep every fine-tuned model under OUT/.../models.")
@click.option("--report", "report_only", is_flag=True, help="Only gather the runs finished so far; train nothing.")
@executor_options("each arm's training", unit="runs")
@teacher_url_option
def ablate(grid, out, seeds, steps, queries, max_seq_length, arms, light, keep_models, report_only, **kw) -> None:
    """Train the student on every arm of GRID, several seeds each, and compare them.

    Arms are curate recipes (mine / filter / export options), sentence-transformers'
    mine_hard_negatives (kind: st) and the untrained student (kind: base).  Prints mean ± std
    of NDCG@10 per arm and the difference to base and to the best baseline.

    With --executor ray the runs train on Ray workers, several at once (--gpus-per-worker 1 on a
    GPU cluster); their data is made here first, and OUT must be a folder every worker can read.
    """
    from curate.ablate.main import AblateOptions, ablate_main

    ablate_main(AblateOptions(grid=grid, out=out, seeds=tuple(seeds), steps=steps, queries=queries,
                              max_seq_length=max_seq_length, arms=tuple(arms),
                              light=light, keep_models=keep_models,
                              report_only=report_only, executor=executor_from(kw)))
