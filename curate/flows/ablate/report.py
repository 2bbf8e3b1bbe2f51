"""Aggregate the arms: mean ± std over seeds, the difference to ``base`` and to the best baseline."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

METRIC = "ndcg@10"


def summarise(results: dict[str, list[dict[str, Any]]], baselines: list[str], metric: str = METRIC
              ) -> list[dict[str, Any]]:
    """One row per arm, in grid order: per-seed values, mean, std (sample; 0 for one seed), and
    the mean's difference to the untrained model and to the best baseline arm (by mean)."""
    rows = []
    for arm, runs in results.items():
        values = [r["metrics"][metric] for r in runs]
        rows.append({"arm": arm, "kind": runs[0]["kind"] if runs else None,
                     "seeds": [r["seed"] for r in runs], "values": values,
                     "mean": statistics.fmean(values) if values else None,
                     "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                     "train_s": statistics.fmean([r["training"]["train_s"] for r in runs if r.get("training")])
                     if any(r.get("training") for r in runs) else None})
    by_name = {r["arm"]: r for r in rows}
    base = next((r for r in rows if r["kind"] == "base" and r["mean"] is not None), None)
    done_baselines = [by_name[b] for b in baselines if b in by_name and by_name[b]["mean"] is not None]
    best = max(done_baselines, key=lambda r: r["mean"]) if done_baselines else None
    for r in rows:
        if r["mean"] is None:
            continue
        r["vs_base"] = r["mean"] - base["mean"] if base else None
        r["vs_best_baseline"] = r["mean"] - best["mean"] if best else None
        if best is not None and r is not best:
            spread = max(r["std"], best["std"])
            r["beats_best_baseline"] = bool(r["mean"] - best["mean"] > spread)
        if base is not None and r is not base:
            r["beats_base"] = bool(r["mean"] - base["mean"] > r["std"])
    return rows


def precisions(results: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """The precision each run was scored at, as ``{precision: ["arm seed N", ...]}`` (runs that
    recorded none are left out).

    ``eval --precision auto`` resolves per machine (bf16 where the CPU has it natively, else int8),
    and the two give a light set scores further apart than most arms are (docs/stages/ablate.md).
    A light grid's cells are scored at the one precision its planner chose (part of each score's
    identity), but results carried over from an older report (``legacy``) can still differ, so the
    table says when it mixes them."""
    found: dict[str, list[str]] = {}
    for arm, runs in results.items():
        for r in runs:
            if r.get("precision"):
                found.setdefault(str(r["precision"]), []).append(f"{arm} seed {r['seed']}")
    return found


def mixed_precision_warning(found: dict[str, list[str]]) -> str | None:
    """One line when the table's runs were scored at more than one precision (None: one)."""
    if len(found) < 2:
        return None
    parts = "; ".join(f"{p}: {', '.join(runs[:4])}{' ...' if len(runs) > 4 else ''}" for p, runs in found.items())
    return (f"warning: this table mixes runs scored at different precisions ({parts}); their scores are not "
            f"comparable: remove the odd ones' eval folders (OUT/eval/*) and run again on one machine")


def print_table(rows: list[dict[str, Any]], best_baseline: str | None, metric: str = METRIC) -> None:
    from rich.table import Table

    from curate.core.progress import console

    table = Table(title=f"{metric} (mean ± std over seeds)")
    for col in ("arm", "kind", "seeds", metric, "± std", "vs base", f"vs {best_baseline or 'best baseline'}"):
        table.add_column(col, justify="left" if col in ("arm", "kind") else "right")

    def signed(v):
        return "" if v is None else f"{v:+.4f}"

    for r in rows:
        if r["mean"] is None:
            table.add_row(r["arm"], r["kind"] or "", "0", "not run", "", "", "")
            continue
        table.add_row(r["arm"], r["kind"], str(len(r["values"])), f"{r['mean']:.4f}", f"{r['std']:.4f}",
                      signed(r.get("vs_base")), signed(r.get("vs_best_baseline")))
    console.print(table)


def write_chart(rows: list[dict[str, Any]], path: Path, title: str, metric: str = METRIC) -> Path | None:
    done = [r for r in rows if r["mean"] is not None]
    if not done:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"base": "#999999", "st": "#d98c3f", "curate": "#3f7fd9"}
    fig, ax = plt.subplots(figsize=(max(5.0, 0.8 * len(done) + 2), 4))
    xs = range(len(done))
    ax.bar(xs, [r["mean"] for r in done], yerr=[r["std"] for r in done], capsize=4,
           color=[colours.get(r["kind"], "#3f7fd9") for r in done])
    low = min(r["mean"] - r["std"] for r in done)
    high = max(r["mean"] + r["std"] for r in done)
    pad = max(0.005, (high - low) * 0.3)
    ax.set_ylim(low - pad, high + pad)
    ax.set_xticks(list(xs), [r["arm"] for r in done], rotation=30, ha="right")
    ax.set_ylabel(metric)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
