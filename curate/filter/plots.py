"""Pictures of the teacher's view of a file, for the filter report.

* ``teacher_scores.png``: histograms of positive and negative teacher scores;
* ``teacher_gap.png``: positive minus negative score, one value per negative, with the
  NV-Retriever 95% ceiling's typical gap marked (the shape of their Figure 4);
* ``teacher_levels.png``: mean query-negative similarity per level, beside the MGH
  paper's reference curve.

Only records that carry teacher scores are drawn; a plot with nothing to show is skipped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from curate.filter.steps.granularity import MGH_REFERENCE, level_means


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_plots(records, out_dir) -> list[Path]:
    """Write the PNGs into ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pos, neg, gap = [], [], []
    for rec in records:
        if rec.teacher is None or rec.teacher.positive is None:
            continue
        p = float(rec.teacher.positive)
        pos.append(p)
        for n in rec.negatives:
            if n.teacher_score is not None:
                neg.append(float(n.teacher_score))
                gap.append(p - float(n.teacher_score))
    paths: list[Path] = []
    if not pos:
        return paths
    plt = _pyplot()

    fig, ax = plt.subplots(figsize=(7, 4))
    lo = min(pos + neg) if neg else min(pos)
    hi = max(pos + neg) if neg else max(pos)
    bins = np.linspace(lo, hi, 41) if hi > lo else 20
    ax.hist(pos, bins=bins, alpha=0.6, label=f"positives (n={len(pos)})", color="tab:green")
    if neg:
        ax.hist(neg, bins=bins, alpha=0.6, label=f"negatives (n={len(neg)})", color="tab:red")
    ax.set_xlabel("teacher cosine similarity to the query")
    ax.set_ylabel("count")
    ax.set_title("Teacher scores")
    ax.legend()
    fig.tight_layout()
    paths.append(out / "teacher_scores.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    if gap:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.hist(gap, bins=40, color="tab:blue", alpha=0.8)
        ax.axvline(0.0, color="black", linewidth=1)
        ax.axvline(0.05 * float(np.median(pos)), color="tab:orange", linestyle="--",
                   label="negative at 95% of the median positive")
        ax.set_xlabel("positive score - negative score")
        ax.set_ylabel("negatives")
        ax.set_title(f"Positive minus negative ({sum(g <= 0 for g in gap)} of {len(gap)} at or below 0)")
        ax.legend()
        fig.tight_layout()
        paths.append(out / "teacher_gap.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    means, counts = level_means(records)
    if means:
        levels = sorted(int(k) for k in means)
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.bar([str(lv) for lv in levels], [means[str(lv)] for lv in levels], color="tab:purple",
               alpha=0.7, label="this file")
        for lv in levels:
            ax.annotate(f"n={counts[str(lv)]}", (levels.index(lv), means[str(lv)]),
                        ha="center", va="bottom", fontsize=8)
        ref = [lv for lv in levels if str(lv) in MGH_REFERENCE]
        if ref:
            ax.plot([levels.index(lv) for lv in ref], [MGH_REFERENCE[str(lv)] for lv in ref],
                    "o--", color="black", label="MGH paper (other model)")
        ax.set_xlabel("negative level (1 = hardest)")
        ax.set_ylabel("mean query-negative cosine")
        ax.set_title("Similarity per level")
        vals = [means[str(lv)] for lv in levels] + [MGH_REFERENCE[str(lv)] for lv in ref]
        ax.set_ylim(min(0.0, min(vals) - 0.05), max(vals) + 0.08)
        ax.legend(loc="lower left")
        fig.tight_layout()
        paths.append(out / "teacher_levels.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths
