"""Does the shortcut audit predict the training result? One table per ablate grid: each arm's
training rows, its negatives by source, the export audit's AUCs, and NDCG@10 (mean ± std over the
grid's seeds) beside the untrained student. Reads a finished grid; trains nothing.

    .venv/bin/python bench/audit_vs_training.py bench/grids/nfcorpus-llm-negatives.yaml --out runs/ablate-nf-llm

The audit is the one every export writes (``export_report.json``: ``audit``), for the seed-0
export of each arm (the seeds only shuffle the same records). Columns:

* ``llm/corpus``: LLM-written negatives told from corpus passages (char n-grams / embeddings);
* ``pos/neg``: positives told from negatives without the query (char n-grams / embeddings).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from curate.core.records import read_records  # noqa: E402
from curate.flows.ablate.grid import load_grid  # noqa: E402


def _auc(audit: dict, comparison: str) -> str:
    rows = [c for c in audit.get("comparisons", []) if c["comparison"] == comparison and c["level"] == "all"]
    if not rows:
        return "   -   /   -  "
    c = max(rows, key=lambda r: r["n_b"])  # the biggest family
    emb = c.get("embedding_auc")
    return f"{c['char_auc']:.3f} / {emb:.3f}" if emb is not None else f"{c['char_auc']:.3f} /   -  "


def _export_of(grid, arm, out: Path) -> Path | None:
    """The export the arm's run of the grid's first seed trained on (None: its cell is not finished)."""
    from curate.flows.ablate.arms import cell_steps
    from curate.flows.ablate.cells import walk

    found, undone = walk(cell_steps(grid, arm, grid.seeds[0], out), out)
    return Path(found["rows"].out) if undone is None else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("grid")
    ap.add_argument("--out", required=True, help="the grid's --out folder")
    args = ap.parse_args()
    grid = load_grid(args.grid)
    report = json.loads((Path(args.out) / "ablate_report.json").read_text())
    summary = {r["arm"]: r for r in report["summary"]}
    print(f"{report['title']}; budget {report['budget']}")
    print(f"{'arm':<16} {'records':>7} {'rows':>5} {'negatives by source':<26} {'llm/corpus AUC':>15} "
          f"{'pos/neg AUC':>15}  NDCG@10")
    for arm in grid.arms:
        s = summary.get(arm.name)
        score = "-" if not s or not s["values"] else (
            f"{s['mean']:.4f} ± {s['std']:.4f}" + (f"  ({s['vs_base']:+.4f} vs base)" if arm.kind != "base" else ""))
        if arm.kind != "curate":
            print(f"{arm.name:<16} {'':>7} {'':>5} {'':<26} {'':>15} {'':>15}  {score}")
            continue
        folder = _export_of(grid, arm, Path(args.out))
        if folder is None:
            print(f"{arm.name:<16} (no finished run of seed {grid.seeds[0]} in the report)")
            continue
        rep = json.loads((folder / "export_report.json").read_text())
        records = read_records(json.loads((folder / "run.json").read_text())["inputs"][0]["path"])
        sources = Counter(n.source for r in records for n in r.negatives)
        audit = rep.get("audit") or {}
        rows = rep["counts"].get("train", "?")
        by_source = ", ".join(f"{k} {v}" for k, v in sorted(sources.items())) or "none"
        print(f"{arm.name:<16} {len(records):>7} {rows!s:>5} {by_source:<26} "
              f"{_auc(audit, 'llm_vs_corpus'):>15} {_auc(audit, 'positive_vs_negative'):>15}  {score}")


if __name__ == "__main__":
    main()
