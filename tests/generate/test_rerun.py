"""A re-run of generate on its own folder with an option that changes the data starts afresh.

Generate appends as answers arrive so that a killed run resumes; a re-run with another seed,
count, model or task must not add its records to the last run's (docs: Run folders, "One
contract, one runner"). `curate pipeline` runs generate the same way, through `run_stage`.
"""

from __future__ import annotations

import pytest

from tests.fake_llm_server import fake_llm_server
from tests.generate.test_from_corpus import _docs, _generate
from tests.helpers import read_jsonl


@pytest.mark.parametrize("changed, flag, expect", [
    (("-n", "2"), "--num-examples", 2),
    (("--seed", "1"), "--seed", 4),
    (("--model", "other"), "--model", 4),
    (("--task", "from-corpus-multihop"), "--task", None),
])
def test_a_changed_option_clears_the_last_runs_records_and_names_the_option(tmp_path, changed, flag, expect):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server() as srv:
        first = _generate(srv.base_url, docs, out, "-n", "4")
        assert first.returncode == 0, first.stderr
        before = read_jsonl(out / "generated.jsonl")
        again = _generate(srv.base_url, docs, out, "-n", "4")  # the same command resumes: nothing changed
        assert again.returncode == 0 and "changed since" not in again.stdout + again.stderr
        assert read_jsonl(out / "generated.jsonl") == before
        proc = _generate(srv.base_url, docs, out, "-n", "4", *changed)
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert f"{flag} changed since the run in" in said and "starts afresh" in " ".join(said.split())
    records = read_jsonl(out / "generated.jsonl")
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids)), "no record twice"
    if expect is not None:
        assert 0 < len(records) <= expect, "this run's records only, not the last run's beside them"
    if flag == "--task":
        assert {r["task_type"] for r in records} == {"from-corpus-multihop"}, "one family, not both"
    if flag == "--model":
        assert {r["meta"].get("model") for r in records} <= {"other", None}
