"""What an LLM judge step says about its time and cost: a plan before its first call, a measured
estimate once the first wave of calls is answered, and the answers' tokens (and cost, at the
run's price or the recipe's) in its notes."""

from __future__ import annotations

import re

import pytest

from curate.core.errors import CurateError
from curate.filter.recipe import load_recipe
from curate.filter.steps.judges import judge_query
from tests.filter.test_judges import FROM_CORPUS_TASK, ctx_for, record, run

N = 12


def test_judge_query_plans_measures_and_prices_its_calls(srv, tmp_path, capsys):
    recs = [record(i % 12, task=FROM_CORPUS_TASK, negatives=[]) for i in range(N)]
    for i, rec in enumerate(recs):
        rec.id = f"rec-{i}"
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_query")
    ctx.price = 0.01
    run(judge_query, recs, {"concurrency": 3}, ctx)
    err = capsys.readouterr().err
    plan = re.search(r"^judge_query: estimate 12 requests, ~([\d,]+) prompt tokens, up to 6,144 completion "
                     r"tokens \(up to ~\$[\d.]+ at \$0\.01/1k\); time once the first answers are in$", err, re.M)
    assert plan, err  # 12 records, one judge, max_tokens 512 each
    assert re.search(r"^judge_query: estimate ~\S+ in all for 12 requests at [\d.]+ requests/s measured "
                     r"\(about \S+ left\), ~\$[\d.]+ at \$0\.01/1k$", err, re.M), err
    note = ctx.notes["judge_query"]
    sent = sum(len(m["content"]) for r in srv.chat_requests for m in r.body["messages"])
    assert note["estimate"]["requests"] == N and note["estimate"]["completion_tokens_max"] == N * 512
    assert abs(note["estimate"]["prompt_tokens"] - sent / 4) <= 0.05 * sent / 4
    assert note["estimate"]["seconds"] is not None
    assert note["tokens"]["prompt"] > 0 and note["tokens"]["completion"] > 0
    assert note["cost"] == round((note["tokens"]["prompt"] + note["tokens"]["completion"]) / 1000 * 0.01, 4)


def test_an_unpriced_judge_notes_tokens_but_no_cost(srv, tmp_path):
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_query")
    run(judge_query, [record(0, task=FROM_CORPUS_TASK, negatives=[])], {}, ctx)
    note = ctx.notes["judge_query"]
    assert note["tokens"]["prompt"] > 0 and "cost" not in note and "cost" not in note["estimate"]


def test_a_recipe_may_carry_the_judges_price(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("price_per_1k_tokens: 0.25\nsteps:\n  - judge_query: {}\n")
    assert load_recipe(str(path)).price_per_1k_tokens == 0.25
    path.write_text("steps:\n  - judge_query: {}\n")
    assert load_recipe(str(path)).price_per_1k_tokens is None
    path.write_text("price_per_1k_tokens: -1\nsteps:\n  - judge_query: {}\n")
    with pytest.raises(CurateError, match="price_per_1k_tokens must be at least 0.0"):
        load_recipe(str(path))
