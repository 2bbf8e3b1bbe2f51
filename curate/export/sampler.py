"""Train sentence-transformers on an export in file order, one exported batch per step.

The sentence-transformers trainer draws batches from a shuffled sampler by default, which
would undo the export's curriculum phases and task-homogeneous batches. Its training
arguments take a batch sampler class (``batch_sampler=``); this one yields consecutive
windows of ``batch_size`` rows, so step k trains exactly on the rows of exported batch k when
``per_device_train_batch_size`` equals the export's ``--batch-size``.

This file depends only on torch and sentence-transformers: ``curate export`` copies it
next to the data (``sequential_sampler.py``) so a training machine needs no curate.

    from sequential_sampler import training_args  # or: from curate.export.sampler import ...
    args = training_args(batch_size=32, output_dir="out", num_train_epochs=1)
    trainer = SentenceTransformerTrainer(model=model, args=args, loss=loss,
                                         train_dataset=ds["train"], eval_dataset=ds["dev"])

With several GPUs, accelerate hands consecutive batches to the devices in turn, so each
device still sees whole exported batches and one step covers the next few of them.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data import BatchSampler

try:  # sentence-transformers >= 6
    from sentence_transformers.base.sampler import DefaultBatchSampler
except ImportError:  # 3.x - 5.x
    from sentence_transformers.sampler import DefaultBatchSampler


class SequentialBatchSampler(DefaultBatchSampler):
    """Batches of consecutive row indices: [0..B-1], [B..2B-1], ...; the same every epoch."""

    def __init__(self, dataset: Any, batch_size: int, drop_last: bool = False,
                 valid_label_columns: list[str] | None = None, generator: Any = None, seed: int = 0) -> None:
        # BatchSampler's own constructor, not the parent's: the parent signature changed
        # across releases, and all this sampler needs is the index range in order.
        BatchSampler.__init__(self, range(len(dataset)), batch_size=batch_size, drop_last=drop_last)
        self.valid_label_columns = valid_label_columns
        self.generator = generator
        self.seed = seed
        self.epoch = 0


def training_args(batch_size: int, **kwargs: Any):
    """``SentenceTransformerTrainingArguments`` that read the data in file order, ``batch_size``
    rows per device step (use the export's ``--batch-size``); other keywords pass through."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    kwargs.setdefault("per_device_eval_batch_size", batch_size)
    return SentenceTransformerTrainingArguments(per_device_train_batch_size=batch_size,
                                                batch_sampler=SequentialBatchSampler, **kwargs)
