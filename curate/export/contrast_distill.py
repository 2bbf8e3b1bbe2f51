"""A loss that learns from the labels and from the teacher's scores at once.

``MultipleNegativesRankingLoss`` ranks each query's positive above every other text of its batch
(its own negatives and the other rows' texts), one-hot: a mined negative counts as fully
irrelevant. The distillation term matches the teacher's softmax over the row's own texts (the
export's ``label`` column), so a negative the teacher scores near the positive costs little; but it
never sees another row's texts. ``ContrastAndDistill`` adds the two on one forward pass, and the
trainer logs each part (``contrast``, ``distill``, the latter already weighted).

Why the distillation term is computed here and not by sentence-transformers' ``DistillKLDivLoss``:
that loss multiplies its KL by the student temperature squared (right for a temperature near 1,
where it keeps gradients the size they were). At the cosine temperature 0.05 that factor is 0.0025,
so summed with the contrastive loss it moved nothing. Here the KL is left unscaled: both terms then
push the student's cosines with gradients of one size, and ``distill_weight`` says how the two are
weighed (1: equal; 10 is the CADET setting, the contrastive term at a tenth of the KL).

Near positives (``near_positive``, off by default): a row's negative that the teacher scores at or
above ``near_positive`` x its positive's score is likely relevant too. One-hot, the contrastive term
would push it away at full strength; the KL already gives it the share the teacher gives it. With
``near_positive`` set, such a negative is left out of that row's contrastive softmax and kept in the
KL (CADET's listwise recipe). Mining's positive-aware rule drops those candidates before they reach
a row, so this acts on lists mined without it (``curate mine --method naive``).

Temperatures: the student's cosines are divided by ``temperature`` (0.05, the contrastive loss's
scale of 20) and the teacher's scores by ``teacher_temperature``. By default the two are equal,
because curate's teacher scores are cosines (or BM25 mixed into one) on the student's own scale:
the student then learns the teacher's score gaps one to one. A larger teacher temperature (CADET
uses 0.3) flattens the target, teaching the student smaller gaps than the teacher has; use one
when the teacher's scores are spread wider than cosines, such as a cross-encoder's logits.

This file depends only on torch and sentence-transformers: ``curate export`` copies it next to
scored data (``contrast_distill.py``) so a training machine needs no curate.

    from contrast_distill import ContrastAndDistill  # or: from curate.export.contrast_distill import ...
    loss = ContrastAndDistill(model, temperature=0.05)
    loss = ContrastAndDistill(model, temperature=0.05, teacher_temperature=0.3, distill_weight=10)  # CADET's
    loss = ContrastAndDistill(model, temperature=0.05, near_positive=0.95)  # near positives: KL only
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:  # sentence-transformers >= 6: one forward pass the two terms share
    from sentence_transformers.base.losses.merged_forward import embed_columns
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
except ImportError:  # 3.x - 5.x: the contrastive loss runs its own
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    embed_columns = None


def listwise_kl(embeddings: list[torch.Tensor], teacher_scores: torch.Tensor, temperature: float,
                teacher_temperature: float) -> torch.Tensor:
    """KL from the teacher's softmax over each row's texts to the student's (cosines), mean over rows,
    with no temperature-squared factor (see the module's docstring for why)."""
    query, *texts = embeddings
    cosines = torch.stack([F.cosine_similarity(query, t, dim=-1) for t in texts], dim=1)
    student = torch.log_softmax(cosines / temperature, dim=1)
    teacher = torch.softmax(teacher_scores.detach().to(cosines.dtype) / teacher_temperature, dim=1)
    return F.kl_div(student, teacher, reduction="batchmean")


def near_positives(teacher_scores: torch.Tensor, near_positive: float) -> torch.Tensor:
    """Which of each row's negatives (columns 1..n of ``teacher_scores``; column 0 is the positive) the
    teacher scores at or above ``near_positive`` x the positive's score: a (rows, n) boolean mask. A
    row whose positive scores 0 or below has none (the ratio says nothing there)."""
    positive = teacher_scores[:, :1]
    return (teacher_scores[:, 1:] >= near_positive * positive) & (positive > 0)


def masked_contrast(embeddings: list[torch.Tensor], masked: torch.Tensor, scale: float,
                    reduction: str = "mean") -> torch.Tensor:
    """The contrastive loss of ``MultipleNegativesRankingLoss`` (each query's positive against every
    positive and negative of the batch, cosines times ``scale``) with each row's ``masked`` own
    negatives (a (rows, n) mask) left out of that row's softmax; they stay in the other rows' as
    in-batch negatives. ``reduction``: ``mean`` over rows, or ``none`` for each row's term."""
    query, *texts = embeddings
    rows = query.shape[0]
    candidates = torch.cat(texts, dim=0)  # positives, then each negative column: column j * rows + i is row i's
    logits = scale * F.cosine_similarity(query.unsqueeze(1), candidates.unsqueeze(0), dim=-1)
    own = torch.zeros_like(logits, dtype=torch.bool)
    index = torch.arange(rows, device=query.device)
    for j in range(masked.shape[1]):
        own[index, (j + 1) * rows + index] = masked[:, j].to(query.device)
    logits = logits.masked_fill(own, float("-inf"))
    return F.cross_entropy(logits, index, reduction=reduction)


class ContrastAndDistill(torch.nn.Module):
    """``MultipleNegativesRankingLoss`` plus ``distill_weight`` x the listwise KL to the teacher on the
    same rows: columns anchor, positive, negative_1..n and a ``label`` with the teacher's n + 1 scores.
    ``temperature`` is the student's; ``teacher_temperature`` (None: the same) the teacher's;
    ``near_positive`` (None: off) leaves near-positive negatives out of the contrastive term."""

    def __init__(self, model, temperature: float = 0.05, teacher_temperature: float | None = None,
                 distill_weight: float = 1.0, near_positive: float | None = None):
        super().__init__()
        teacher_temperature = temperature if teacher_temperature is None else teacher_temperature
        if not (temperature > 0 and teacher_temperature > 0 and distill_weight >= 0):
            raise ValueError("temperatures must be above 0 and distill_weight at least 0, got "
                             f"{temperature}, {teacher_temperature}, {distill_weight}")
        if near_positive is not None and not 0 < near_positive <= 1:
            raise ValueError(f"near_positive must be in (0, 1], got {near_positive}")
        self.near_positive = near_positive
        self.model = model
        self.temperature = temperature
        self.teacher_temperature = teacher_temperature
        self.distill_weight = distill_weight
        self.contrast = MultipleNegativesRankingLoss(model)

    def forward(self, sentence_features, labels):
        if embed_columns is None:
            contrast = self.contrast(sentence_features, labels)
            embeddings = [self.model(f)["sentence_embedding"] for f in sentence_features]
        else:
            embeddings = embed_columns(self.model, sentence_features)
            contrast = None
        if self.near_positive is not None:
            contrast = masked_contrast(embeddings, near_positives(labels, self.near_positive), self.contrast.scale)
        elif contrast is None:
            contrast = self.contrast.compute_loss_from_embeddings(embeddings, None)
        distill = listwise_kl(embeddings, labels, self.temperature, self.teacher_temperature)
        return {"contrast": contrast, "distill": self.distill_weight * distill}

    def get_config_dict(self) -> dict:
        """What the trained model's card records about this loss."""
        return {"temperature": self.temperature, "teacher_temperature": self.teacher_temperature,
                "distill_weight": self.distill_weight, "near_positive": self.near_positive}
