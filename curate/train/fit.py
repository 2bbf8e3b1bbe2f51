"""Fine-tune a student on a run's rows with sentence-transformers' trainer and one of its losses:
what ``curate train`` and each arm of ``curate ablate`` do.

The loss is ``Training.loss`` (an ablation arm's ``train: {loss: ...}``, ``curate train --loss``): the contrastive
MultipleNegativesRankingLoss (default), the two distillation losses that read the export's
``label`` column (the teacher's scores: ``margin-mse`` on the positive-minus-negative margins,
as GPL trains, ``distill-kl`` on the teacher's softmax over each row's texts), their sum
``mnrl+distill-kl`` (the row's texts ranked as the teacher ranks them, and every other row's
texts still in the softmax as negatives, which distillation alone never sees; the KL unscaled and
weighed by ``distill_weight``, so both terms count), or ``masked``,
the contrastive loss with likely false negatives masked: GISTEmbedLoss with the teacher as its
guide (its cached form, which takes several negatives a row), so an in-batch or hard negative
the teacher scores above 95% of the positive (the positive-aware rule mining applies, ``margin``
0.05 relative) is left out of the softmax.

curate exports are read in file order (the sampler the export ships), so the curriculum and
batch layout are what the student sees; baseline rows are read the way sentence-transformers
recommends for this loss (shuffled, ``NO_DUPLICATES`` batches); ``order`` overrides either.
Every arm gets the same budget: ``steps`` optimiser steps of ``batch_size`` rows, the rows
repeated as often as the budget needs.  Texts are cut to ``max_seq_length`` tokens while
training (the CPU budget); the saved model keeps the student's own length for evaluation.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from curate.core.errors import CurateError
from curate.core.progress import track


@dataclass
class Budget:
    """A training budget (each ablation arm's, or ``curate train``'s). Types and ranges are declared
    here (``curate.core.params``) and checked when a grid is read: whole numbers are whole (``steps: 2.9`` or ``true`` is refused,
    not cut to 2 or 1), and the rates finite."""

    steps: int = field(default=40, metadata={"min": 1})
    batch_size: int = field(default=16, metadata={"min": 2})
    lr: float = field(default=2e-5, metadata={"min": 0.0, "min_open": True})
    max_seq_length: int = field(default=128, metadata={"min": 8})
    warmup_ratio: float = field(default=0.1, metadata={"min": 0.0, "max": 1.0})


SCORED = ("margin-mse", "distill-kl", "mnrl+distill-kl")  # losses that read the teacher's scores (the ``label`` column)
# What a scored loss trains on changed in code (issue 53: the combined loss's distillation term no
# longer scaled to nothing; every export's label lifts the positive above a negative the teacher
# put at or above it), so a result made before is another run: the revision names the run
# (``Training.changed``) and an ablation never takes an older result for a scored arm.
SCORED_REVISION = 2


@dataclass
class Training:
    """How an arm's rows train the student: a grid arm's ``train:`` mapping, checked when the grid
    is read. Only the keys that differ from these defaults name the arm's runs, so arms written
    before it existed keep their results."""

    loss: Literal["mnrl", "margin-mse", "distill-kl", "mnrl+distill-kl", "masked"] = "mnrl"
    # None: the export's file order for curate arms, shuffled no-duplicates batches for st arms
    order: Literal["export", "no-duplicates"] | None = None
    # distill-kl (alone or beside mnrl) and masked: the softmax temperature on cosines (0.05 is MNRL's scale of 20)
    temperature: float = field(default=0.05, metadata={"min": 0.0, "min_open": True})
    teacher_temperature: float | None = field(default=None, metadata={
        "min": 0.0, "min_open": True,
        "help": "distill-kl and mnrl+distill-kl: the temperature on the teacher's scores (None: the student's, "
                "right for cosine scores on the student's own scale; CADET uses 0.3)."})
    distill_weight: float = field(default=1.0, metadata={
        "min": 0.0,
        "help": "mnrl+distill-kl: the weight of the distillation term beside the contrastive one (its KL unscaled, "
                "so 1 gives both terms gradients of one size; 10 is CADET's contrastive weight 0.1)."})
    # masked: a candidate the teacher scores above (1 - margin) x the positive's score is masked
    margin: float = field(default=0.05, metadata={"min": 0.0, "max": 1.0})
    mask_near: bool = field(default=False, metadata={
        "help": "mnrl+distill-kl: leave a row's negatives the teacher scores at or above (1 - margin) x its "
                "positive out of the contrastive term, keeping them in the KL (CADET's near positives); "
                "mine with method: naive, whose lists keep them."})

    @property
    def near_positive(self) -> float | None:
        """The share of its positive's score at which ``mask_near`` masks a negative (None: off)."""
        return 1 - self.margin if self.mask_near else None

    def conflict(self) -> str | None:
        """What in these settings cannot train together (None: nothing), said once for the grid's
        reader and for the loss."""
        if self.mask_near and self.loss != "mnrl+distill-kl":
            return f"mask_near masks the contrastive term of mnrl+distill-kl, and the loss is {self.loss}"
        return None

    def changed(self) -> dict[str, Any]:
        """The keys that differ from the defaults (what names a run)."""
        default = asdict(Training())
        changed = {k: v for k, v in asdict(self).items() if v != default[k]}
        return {**changed, "revision": SCORED_REVISION} if self.loss in SCORED else changed



def load_student(name: str | None):
    """The student as a fresh ``SentenceTransformer`` (the bundled MiniLM when ``name`` is None),
    loaded the way every curate model is (offline for the bundled one)."""
    from curate.embed.teacher import Teacher

    return Teacher(model=name, cache=False).model


def _steps_callback(advance):
    """A trainer callback that moves curate's bar a step at a time (the trainer's own tqdm is off:
    one style of bar, with its ETA, for every long piece of work)."""
    from transformers import TrainerCallback

    class Steps(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            advance()

    return Steps()


def make_loss(model, training: Training, rows, guide: str | None, batch_size: int):
    """The arm's loss on ``model``; ``guide`` names the teacher model of ``masked`` (None: bundled MiniLM)."""
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer import losses
    except ImportError:  # 3.x - 5.x
        from sentence_transformers import losses

    if training.loss in SCORED:
        if "label" not in rows.column_names:
            raise CurateError(f"loss {training.loss} trains on the teacher's scores, and this export has no `label` "
                              "column (a row lacks a teacher score: see its card's notes)")
        if not any(c.startswith("negative") for c in rows.column_names):
            raise CurateError(f"loss {training.loss} needs a negative on each row, and these rows have none")
    if training.conflict():
        raise CurateError(training.conflict())
    if training.loss == "margin-mse":
        return losses.MarginMSELoss(model)
    if training.loss == "distill-kl":  # alone its T^2 factor is harmless: Adam does not see a loss's scale
        teacher = {} if training.teacher_temperature is None else {"teacher_temperature": training.teacher_temperature}
        return losses.DistillKLDivLoss(model, temperature=training.temperature, **teacher)
    if training.loss == "mnrl+distill-kl":
        from curate.export.contrast_distill import ContrastAndDistill  # the loss the export ships

        return ContrastAndDistill(model, temperature=training.temperature,
                                  teacher_temperature=training.teacher_temperature,
                                  distill_weight=training.distill_weight,
                                  near_positive=training.near_positive)
    if training.loss == "masked":
        # the cached form takes any number of negatives a row; one mini-batch a batch, so it computes what
        # the plain form would; no anchor-anchor or positive-positive terms, so only the masking differs
        # from MultipleNegativesRankingLoss
        teacher = load_student(guide)
        teacher.max_seq_length = model.max_seq_length  # the budget's cut, as the student reads the texts
        return losses.CachedGISTEmbedLoss(model, guide=teacher, temperature=training.temperature,
                                          mini_batch_size=batch_size, margin_strategy="relative",
                                          margin=training.margin, contrast_anchors=False, contrast_positives=False)
    return losses.MultipleNegativesRankingLoss(model)


def fine_tune(student: str | None, rows, budget: Budget, seed: int, in_order: bool, out: Path,
              training: Training | None = None, guide: str | None = None) -> dict[str, Any]:
    """Train a fresh copy of ``student`` on ``rows`` (a ``datasets.Dataset``) with ``training``'s loss
    (``guide``: the teacher model a masked loss consults), save it to ``out``."""
    import torch
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    try:  # sentence-transformers >= 6
        from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    except ImportError:  # 3.x - 5.x
        from sentence_transformers.training_args import BatchSamplers
    from transformers.trainer_callback import PrinterCallback

    training = training or Training()
    if training.order is not None:
        in_order = training.order == "export"
    if training.loss not in SCORED and "label" in rows.column_names:
        rows = rows.remove_columns("label")  # the contrastive losses take no labels

    from curate.export.sampler import SequentialBatchSampler

    torch.manual_seed(seed)
    model = load_student(student)
    eval_length = model.max_seq_length
    model.max_seq_length = min(budget.max_seq_length, eval_length)
    per_pass = math.ceil(len(rows) / budget.batch_size)
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out / "checkpoints"), per_device_train_batch_size=budget.batch_size,
        batch_sampler=SequentialBatchSampler if in_order else BatchSamplers.NO_DUPLICATES,
        max_steps=budget.steps, num_train_epochs=math.ceil(budget.steps / per_pass), learning_rate=budget.lr,
        warmup_steps=max(1, round(budget.steps * budget.warmup_ratio)), lr_scheduler_type="linear",
        save_strategy="no", logging_steps=max(1, budget.steps // 10), seed=seed, data_seed=seed,
        report_to="none", dataloader_drop_last=False, disable_tqdm=True,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=rows,
                                         loss=make_loss(model, training, rows, guide, budget.batch_size))
    trainer.remove_callback(PrinterCallback)  # the loss goes into the result, not onto the console
    started = time.perf_counter()
    with track(budget.steps, "training", quiet=False) as advance:  # ablate's own bar: shown while it quiets others
        trainer.add_callback(_steps_callback(advance))
        result = trainer.train()
    seconds = time.perf_counter() - started
    model.max_seq_length = eval_length
    model.save(str(out))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {"steps": int(result.global_step), "rows": len(rows), "passes": round(result.global_step / per_pass, 2),
            "negatives_per_row": sum(c.startswith("negative") for c in rows.column_names),
            "train_s": round(seconds, 1), "s_per_step": round(seconds / max(1, result.global_step), 2),
            "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
            "device": str(model.device), "loss": training.loss,
            "order": "export" if in_order else "no-duplicates",
            **({"near_positives_masked": _near_positive_count(rows, training)} if training.mask_near else {}),
            **({"options": training.changed()} if training.changed() else {})}


def _near_positive_count(rows, training: Training) -> int:
    """How many of the rows' negatives ``mask_near`` leaves out of the contrastive term: 0 says the
    option did nothing (the mining's positive-aware rule had dropped them all)."""
    import torch

    from curate.export.contrast_distill import near_positives

    return int(near_positives(torch.tensor(rows["label"], dtype=torch.float32), training.near_positive).sum())
