"""Blank documents in a real corpus: where the kept negatives rank, on two code trees.

Issue 52's fault: a corpus with a blank document made that document one of every query's
positives, so every positive-aware threshold was anchored at its near-zero score and the kept
negatives came from the bottom of the ranking, with exit 0. This script mines a BEIR collection
as shipped and with blank documents added (a blank line and a whitespace-only one), through
``python -m curate mine`` on the tree given, and prints, for each: records, the kept negatives'
median ``mine_rank``, the share of records whose ``teacher.positive`` is one of their own
positives' scores, and whether the records equal the shipped corpus's.

    python bench/blank_documents.py --tree /work/baseline --data ../shared/data/scifact --out /tmp/bd/base
    python bench/blank_documents.py --tree /work/main     --data ../shared/data/scifact --out /tmp/bd/main

Give both passes one ``CURATE_CACHE_DIR`` so every text has one vector in both.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def _variant(data: Path, out: Path) -> Path:
    dest = out / "with-blanks" / data.name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(data, dest, ignore=shutil.ignore_patterns("SOURCE.txt"))
    with (dest / "corpus.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": "blank-a", "title": "", "text": ""}) + "\n")
        fh.write(json.dumps({"_id": "blank-b", "title": " ", "text": " \n "}) + "\n")
    return dest


def _mine(tree: Path, data: Path, split: str, out: Path) -> list[dict]:
    if out.exists():
        shutil.rmtree(out)
    proc = subprocess.run([sys.executable, "-m", "curate", "mine", "--data", str(data), "--split", split,
                           "--out", str(out)], cwd=tree, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(proc.stderr)
    print(proc.stderr.strip())
    return [json.loads(line) for line in (out / "mined.jsonl").read_text(encoding="utf-8").splitlines()]


def _facts(records: list[dict]) -> dict:
    ranks = [n["mine_rank"] for r in records for n in r["negatives"]]
    anchored = sum(1 for r in records if r["teacher"]["positives"]
                   and abs(r["teacher"]["positive"] - min(r["teacher"]["positives"])) < 1e-9)
    return {"records": len(records), "negatives": len(ranks),
            "median_mine_rank": statistics.median(ranks) if ranks else None,
            "anchor_is_own_positive": f"{anchored}/{len(records)}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--split", default="train")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    plain = _mine(a.tree, a.data.resolve(), a.split, a.out / "plain")
    blanks = _mine(a.tree, _variant(a.data.resolve(), a.out), a.split, a.out / "blanks")
    strip = lambda rs: [{k: v for k, v in r.items() if k != "id"} for r in rs]  # noqa: E731 (ids name the folder)
    result = {"tree": str(a.tree), "data": a.data.name, "split": a.split,
              "shipped": _facts(plain), "with_two_blank_documents": _facts(blanks),
              "records_equal": strip(plain) == strip(blanks)}
    print(json.dumps(result, indent=1))
    (a.out / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
