"""A loss that learns from the labels and from the teacher's scores at once.

``MultipleNegativesRankingLoss`` ranks each query's positive above every other text of its batch
(its own negatives and the other rows' texts), one-hot: a mined negative counts as fully
irrelevant. ``DistillKLDivLoss`` matches the teacher's softmax over the row's own texts (the
export's ``label`` column), so a negative the teacher scores near the positive costs little; but it
never sees another row's texts. ``ContrastAndDistill`` sums the two on one forward pass, and the
trainer logs each part (``contrast``, ``distill``).

This file depends only on torch and sentence-transformers: ``curate export`` copies it next to
scored data (``contrast_distill.py``) so a training machine needs no curate.

    from contrast_distill import ContrastAndDistill  # or: from curate.export.contrast_distill import ...
    loss = ContrastAndDistill(model, temperature=0.05)
"""

from __future__ import annotations

import torch

try:  # sentence-transformers >= 6: one forward pass the two losses share
    from sentence_transformers.base.losses.merged_forward import embed_columns
    from sentence_transformers.sentence_transformer.losses import DistillKLDivLoss, MultipleNegativesRankingLoss
except ImportError:  # 3.x - 5.x: each loss runs its own
    from sentence_transformers.losses import DistillKLDivLoss, MultipleNegativesRankingLoss

    embed_columns = None


class ContrastAndDistill(torch.nn.Module):
    """``MultipleNegativesRankingLoss`` plus ``DistillKLDivLoss`` (``temperature``) on the same rows:
    columns anchor, positive, negative_1..n and a ``label`` with the teacher's n + 1 scores."""

    def __init__(self, model, temperature: float = 0.05):
        super().__init__()
        self.model = model
        self.contrast = MultipleNegativesRankingLoss(model)
        self.distill = DistillKLDivLoss(model, temperature=temperature)

    def forward(self, sentence_features, labels):
        if embed_columns is None:
            return {"contrast": self.contrast(sentence_features, labels),
                    "distill": self.distill(sentence_features, labels)}
        embeddings = embed_columns(self.model, sentence_features)
        return {"contrast": self.contrast.compute_loss_from_embeddings(embeddings, None),
                "distill": self.distill.compute_loss_from_embeddings(embeddings, labels)}
