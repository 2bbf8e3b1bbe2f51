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


class ContrastAndDistill(torch.nn.Module):
    """``MultipleNegativesRankingLoss`` plus ``distill_weight`` x the listwise KL to the teacher on the
    same rows: columns anchor, positive, negative_1..n and a ``label`` with the teacher's n + 1 scores.
    ``temperature`` is the student's; ``teacher_temperature`` (None: the same) the teacher's."""

    def __init__(self, model, temperature: float = 0.05, teacher_temperature: float | None = None,
                 distill_weight: float = 1.0):
        super().__init__()
        teacher_temperature = temperature if teacher_temperature is None else teacher_temperature
        if not (temperature > 0 and teacher_temperature > 0 and distill_weight >= 0):
            raise ValueError("temperatures must be above 0 and distill_weight at least 0, got "
                             f"{temperature}, {teacher_temperature}, {distill_weight}")
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
            contrast = self.contrast.compute_loss_from_embeddings(embeddings, None)
        distill = listwise_kl(embeddings, labels, self.temperature, self.teacher_temperature)
        return {"contrast": contrast, "distill": self.distill_weight * distill}

    def get_config_dict(self) -> dict:
        """What the trained model's card records about this loss."""
        return {"temperature": self.temperature, "teacher_temperature": self.teacher_temperature,
                "distill_weight": self.distill_weight}
