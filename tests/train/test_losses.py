"""Both parts of the combined loss move the student: on a real batch (the bundled MiniLM, SciFact
claims with their evidence and two other abstracts, a teacher's scores in ``label``), the gradient
of each part is within a factor of 100 of the other's. The old sum, with sentence-transformers'
``DistillKLDivLoss`` scaled by the temperature squared, fails the same check (its distillation
part was about 2,500 times too small), so the check has teeth."""

from __future__ import annotations

import pytest

from curate.export.contrast_distill import ContrastAndDistill
from tests.helpers import SHARED_DATA

ROWS = 6
FACTOR = 100  # the bar: neither part may be more than this many times smaller than the other


@pytest.fixture(scope="module")
def student():
    from curate.train.fit import load_student

    model = load_student(None)
    model.max_seq_length = 64  # the CPU budget's cut; the gradients' sizes do not depend on it
    model.eval()  # no dropout: the same gradients on every run
    return model


@pytest.fixture(scope="module")
def batch(student):
    """(features of anchor, positive, negative_1, negative_2; the teacher's scores), as the trainer hands them."""
    import torch

    from curate.datasets.beir import load_beir

    if not (SHARED_DATA / "scifact" / "corpus.jsonl").exists():  # pragma: no cover
        pytest.skip("no SciFact copy at hand")
    data = load_beir(SHARED_DATA / "scifact", "train")
    qids = list(data.qrels)[:ROWS]
    pool = [d for d in data.corpus if not any(d in data.qrels[q] for q in qids)][:2 * ROWS]
    columns = [[data.queries[q] for q in qids], [data.corpus[next(iter(data.qrels[q]))] for q in qids],
               [data.corpus[pool[2 * k]] for k in range(ROWS)], [data.corpus[pool[2 * k + 1]] for k in range(ROWS)]]
    prepare = getattr(student, "preprocess", None) or student.tokenize  # preprocess: sentence-transformers >= 6
    features = [{k: v.to(student.device) if isinstance(v, torch.Tensor) else v for k, v in prepare(texts).items()}
                for texts in columns]
    # scores the way a hybrid teacher gives them: the positive ahead, the negatives not far behind
    labels = torch.tensor([[0.70 - 0.01 * k, 0.58 + 0.01 * k, 0.46] for k in range(ROWS)], device=student.device)
    return features, labels


def _grad_norm(term, params) -> float:
    import torch

    grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
    return float(torch.sqrt(sum((g.float() ** 2).sum() for g in grads if g is not None)))


def _part_norms(terms: dict, model) -> dict[str, float]:
    """Each part's gradient norm over the model's parameters, each part differentiated on its own."""
    params = [p for p in model.parameters() if p.requires_grad]
    return {name: _grad_norm(term, params) for name, term in terms.items()}


def _ratio(norms: dict[str, float]) -> float:
    big, small = max(norms.values()), min(norms.values())
    return big / small if small > 0 else float("inf")


@pytest.mark.parametrize("options", [{}, {"teacher_temperature": 0.3, "distill_weight": 10.0},
                                     {"near_positive": 0.95}], ids=["default", "cadet", "near-positives"])
def test_each_part_of_the_sum_moves_the_student(student, batch, options):
    features, labels = batch
    loss = ContrastAndDistill(student, temperature=0.05, **options)
    norms = _part_norms(loss(features, labels), student)
    assert set(norms) == {"contrast", "distill"}
    assert all(n > 0 for n in norms.values()), norms
    assert _ratio(norms) <= FACTOR, norms


def test_the_old_sum_fails_the_same_check(student, batch):
    """The sum as it was: ``DistillKLDivLoss`` at temperature 0.05, whose loss carries a factor of 0.0025."""
    try:  # sentence-transformers >= 6
        from sentence_transformers.base.losses.merged_forward import embed_columns
        from sentence_transformers.sentence_transformer.losses import (DistillKLDivLoss,
                                                                       MultipleNegativesRankingLoss)
    except ImportError:  # pragma: no cover - older releases: the check above is the one that matters
        pytest.skip("sentence-transformers before 6 has no shared forward to compare on")
    features, labels = batch
    embeddings = embed_columns(student, features)
    terms = {"contrast": MultipleNegativesRankingLoss(student).compute_loss_from_embeddings(embeddings, None),
             "distill": DistillKLDivLoss(student, temperature=0.05).compute_loss_from_embeddings(embeddings, labels)}
    assert _ratio(_part_norms(terms, student)) > FACTOR


def test_the_training_options_reach_the_loss(student):
    """``Training``'s knobs are the loss's: what an ablation arm or ``curate train`` sets is what trains."""
    from datasets import Dataset

    from curate.train.fit import Training, make_loss

    rows = Dataset.from_dict({"anchor": ["q"], "positive": ["p"], "negative_1": ["n"], "label": [[0.7, 0.5]]})
    loss = make_loss(student, Training(loss="mnrl+distill-kl", teacher_temperature=0.3, distill_weight=10.0),
                     rows, None, 2)
    assert (loss.temperature, loss.teacher_temperature, loss.distill_weight) == (0.05, 0.3, 10.0)
    plain = make_loss(student, Training(loss="mnrl+distill-kl"), rows, None, 2)
    assert (plain.teacher_temperature, plain.distill_weight) == (0.05, 1.0)  # the student's temperature, equal parts


def test_an_ablation_never_takes_a_result_made_before_the_scored_losses_changed(tmp_path):
    """The combined loss and the label targets changed what a scored arm trains: such an arm's fit
    carries the revision in its fingerprint, so a fit made before is not taken as this arm's (a
    contrastive arm, whose rows ignore `label`, keeps its fingerprint)."""
    from curate.core.stage import STAGES, fingerprint
    from curate.train.fit import SCORED, SCORED_REVISION, Training

    FIT = STAGES.get("fit")
    for loss in SCORED:
        assert Training(loss=loss).changed() == {"loss": loss, "revision": SCORED_REVISION}
        then = FIT.options(rows=str(tmp_path), out="", training={"loss": loss})
        now = FIT.options(rows=str(tmp_path), out="", training=Training(loss=loss).changed())
        assert fingerprint(FIT, then) != fingerprint(FIT, now)
    assert Training().changed() == {} and Training(loss="masked").changed() == {"loss": "masked"}


def _embeddings(student, features):
    """Each column's embeddings as leaves of their own, so a gradient can be read per text."""
    import torch

    with torch.no_grad():
        columns = [student(dict(f))["sentence_embedding"] for f in features]
    return [c.detach().clone().requires_grad_(True) for c in columns]


def test_with_nothing_near_the_masked_contrast_is_the_contrastive_loss(student, batch):
    """No negative of the batch is near its positive (0.95 of it): the masked form computes exactly
    what ``MultipleNegativesRankingLoss`` does, so switching the option on changes only masked rows."""
    from curate.export.contrast_distill import masked_contrast, near_positives

    features, labels = batch
    contrast = ContrastAndDistill(student).contrast
    if not hasattr(contrast, "compute_loss_from_embeddings"):  # pragma: no cover - sentence-transformers before 6
        pytest.skip("no loss-from-embeddings form to compare with")
    embeddings = _embeddings(student, features)
    labels = labels.clone()
    labels[:, 1] = 0.8 * labels[:, 0]
    assert not near_positives(labels, 0.95).any()
    plain = contrast.compute_loss_from_embeddings(embeddings, None)
    masked = masked_contrast(embeddings, near_positives(labels, 0.95), 20.0)
    assert abs(float(masked) - float(plain)) < 1e-5, (float(masked), float(plain))


def test_a_near_positive_leaves_the_contrast_and_stays_in_the_distillation(student, batch):
    """Row 0's first negative scored at 0.97 of its positive: row 0's contrastive term no longer
    moves that text (its gradient is exactly 0; it stays an in-batch negative of the other rows),
    while each other row's term still pushes its own negative; the KL still moves it. Row 1's
    negative at 0.9 of its positive stays in both."""
    import torch

    from curate.export.contrast_distill import listwise_kl, masked_contrast, near_positives

    features, labels = batch
    labels = labels.clone()
    labels[:, 1] = 0.8 * labels[:, 0]
    labels[0, 1] = 0.97 * labels[0, 0]
    labels[1, 1] = 0.90 * labels[1, 0]
    mask = near_positives(labels, 0.95)
    assert mask.sum() == 1 and mask[0, 0]
    embeddings = _embeddings(student, features)
    negative = embeddings[2]  # negative_1, one row per query
    per_row = masked_contrast(embeddings, mask, 20.0, reduction="none")
    own = [torch.autograd.grad(per_row[i], negative, retain_graph=True)[0][i] for i in range(ROWS)]
    assert float(own[0].norm()) == 0.0
    assert all(float(g.norm()) > 0 for g in own[1:])
    unmasked = masked_contrast(embeddings, torch.zeros_like(mask), 20.0, reduction="none")
    assert float(torch.autograd.grad(unmasked[0], negative)[0][0].norm()) > 0  # the mask is what stopped it
    (distill,) = torch.autograd.grad(listwise_kl(embeddings, labels, 0.05, 0.05), negative)
    assert float(distill[0].norm()) > 0
    loss = ContrastAndDistill(student, near_positive=0.95)
    assert loss.get_config_dict()["near_positive"] == 0.95


def test_mask_near_reaches_the_loss_and_the_fit_counts_what_it_masked(student):
    """``Training(mask_near=True)`` builds the masking sum at 1 - margin, and refuses a loss without
    a contrastive term; the count the fit reports is the rows' near-positive negatives."""
    from datasets import Dataset

    from curate.core.errors import CurateError
    from curate.train.fit import Training, _near_positive_count, make_loss

    rows = Dataset.from_dict({"anchor": ["q", "r"], "positive": ["p", "s"], "negative_1": ["n", "m"],
                              "negative_2": ["o", "t"], "label": [[0.7, 0.69, 0.3], [0.8, 0.5, 0.79]]})
    loss = make_loss(student, Training(loss="mnrl+distill-kl", mask_near=True), rows, None, 2)
    assert loss.near_positive == pytest.approx(0.95)
    assert make_loss(student, Training(loss="mnrl+distill-kl"), rows, None, 2).near_positive is None
    assert _near_positive_count(rows, Training(loss="mnrl+distill-kl", mask_near=True)) == 2
    assert _near_positive_count(rows, Training(loss="mnrl+distill-kl", mask_near=True, margin=0.001)) == 0
    with pytest.raises(CurateError, match="mask_near"):
        make_loss(student, Training(loss="distill-kl", mask_near=True), rows, None, 2)
