"""One identity per run: everything that shapes the records is part of it, and ``run.json``
records the key the runner decided "done earlier" by (issue 42, fault 9)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from curate.core.runner import RUN_JSON
from curate.core.stage import DONE, MARKER, RAN, run_stage
from curate.generate.stage import STAGE as GENERATE, GenerateOptions
from curate.llm.options import LLMOptions
from tests.helpers import REPO

PASSAGES = ["The Moon pulls the oceans, which rise and fall twice a day along the coast.",
            "Vaccines train the immune system to know a germ before it can make a person ill.",
            "Lighthouses warned ships of rocks with a bright lamp turning behind a glass lens."]


def _opts(tmp: Path, srv, prompts: Path) -> GenerateOptions:
    docs = tmp / "docs.jsonl"
    if not docs.exists():
        docs.write_text("".join(json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n"
                                for i, t in enumerate(PASSAGES)), encoding="utf-8")
    llm = LLMOptions(base_urls=(srv.base_url,), model="m", api_key="fake-key", max_retries=0, max_reasks=0,
                     timeout=10, cache=str(tmp / "llm.sqlite"))
    return GenerateOptions(out=str(tmp / "gen"), corpus=str(docs), n=3, llm=llm, prompts_dirs=(str(prompts),))


def test_an_edited_prompt_template_is_a_new_run_not_done_earlier(tmp_path, srv):
    prompts = tmp_path / "prompts"
    (prompts / "generate").mkdir(parents=True)
    template = prompts / "generate" / "from-corpus.j2"
    shutil.copy(REPO / "prompts" / "generate" / "from-corpus.j2", template)
    opts = _opts(tmp_path, srv, prompts)

    assert run_stage(GENERATE, opts, resume=True, quiet=True)[1] == RAN
    asked = len(srv.chat_requests)
    assert asked == len(PASSAGES)
    assert run_stage(GENERATE, opts, resume=True, quiet=True)[1] == DONE, "the same command: done earlier"
    assert len(srv.chat_requests) == asked

    template.write_text(template.read_text(encoding="utf-8") + "\nAnswer in plain words.\n", encoding="utf-8")
    assert run_stage(GENERATE, opts, resume=True, quiet=True)[1] == RAN, "the edited prompt runs"
    assert len(srv.chat_requests) == 2 * asked, "every passage is asked again with the new prompt"
    assert "Answer in plain words." in srv.chat_requests[-1].body["messages"][-1]["content"]
    run = json.loads((tmp_path / "gen" / RUN_JSON).read_text())
    assert run["fingerprint"] == json.loads((tmp_path / "gen" / MARKER).read_text())["fingerprint"]
    assert str(template) in [i["path"] for i in run["inputs"]], "run.json names the template it read"


def test_an_edited_judge_template_or_recipe_changes_the_filter_identity(tmp_path):
    from curate.core.stage import fingerprint
    from curate.filter.main import STAGE as FILTER, FilterOptions

    prompts = tmp_path / "prompts"
    (prompts / "judge").mkdir(parents=True)
    template = prompts / "judge" / "relabel.j2"
    shutil.copy(REPO / "prompts" / "judge" / "relabel.j2", template)
    recipe = tmp_path / "mine.yaml"
    shutil.copy(REPO / "filters" / "relabel.yaml", recipe)
    opts = FilterOptions(inp=str(tmp_path / "in.jsonl"), out=str(tmp_path / "f"), recipe=str(recipe),
                         prompts_dirs=(str(prompts),))
    before = fingerprint(FILTER, opts)
    template.write_text(template.read_text(encoding="utf-8") + "\nBe strict.\n", encoding="utf-8")
    after_template = fingerprint(FILTER, opts)
    assert after_template != before, "the judge's edited prompt is another run"
    recipe.write_text(recipe.read_text(encoding="utf-8") + "\n# a comment\n", encoding="utf-8")
    assert fingerprint(FILTER, opts) != after_template, "an edited recipe file is another run"
