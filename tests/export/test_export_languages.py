"""The export's dataset card names the languages of its rows (``generate --languages`` records).

Records that say their language (``language``, and ``positive_language`` for bitext) give the
card's ``language`` list and a count per language; records that do not say keep ``--language``
(default ``en``), and an export of such records only is what it always was.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from curate.core.records import Negative, Record
from curate.export.formats.card import card_languages, language_counts
from curate.export.main import ExportOptions, run_export
from tests.mine_helpers import write_jsonl


def _records(langs: list[tuple[str | None, str | None]]) -> list[Record]:
    out = []
    for i, (lang, pos) in enumerate(langs):
        negs = [Negative(text=f"negative {lv} of record {i}, on another subject number {i * 7 + lv}", level=lv)
                for lv in (1, 2, 3, 4)]
        out.append(Record(id=f"r{i}", task_type="bitext" if pos else "short-long", task="Retrieve the answer.",
                          query=f"query number {i} about thing {i}", positive=f"the positive text of record {i}",
                          negatives=negs, language=lang, positive_language=pos))
    return out


def _export(tmp: Path, records: list[Record], name: str, *extra_language: str) -> tuple[dict, dict]:
    path = write_jsonl(tmp / f"{name}.jsonl", (r.to_dict() for r in records))
    out = tmp / name
    report = run_export(ExportOptions(inputs=(str(path),), out=str(out), formats=("hf",), audit=False,
                                      dev_fraction=0, batch_size=4,
                                      **({"language": extra_language} if extra_language else {})))
    front = (out / "README.md").read_text(encoding="utf-8").split("---\n")[1]
    return yaml.safe_load(front), report


def test_counts_and_the_card_language_list():
    recs = _records([("de", None), ("de", None), ("ja", None), ("de", "en"), (None, None)])
    counts = language_counts(recs)
    assert counts == {"query": {"de": 3, "ja": 1}, "positive": {"de": 2, "en": 1, "ja": 1}}
    assert card_languages(counts, ["en"], unlabelled=True) == ["de", "ja", "en"]  # most rows first: 5, 2, 1
    assert card_languages(counts, ["fr"], unlabelled=False) == ["de", "ja", "en"], "--language: rows that say none"
    assert card_languages(counts, ["fr"], unlabelled=True) == ["de", "ja", "en", "fr"]
    assert language_counts(_records([(None, None)])) == {}
    assert card_languages({}, ["en"], unlabelled=True) == ["en"]


def test_the_card_lists_the_rows_languages(tmp_path):
    langs = [("de", None)] * 6 + [("ja", None)] * 3 + [("ja", "fr")] * 3
    meta, report = _export(tmp_path, _records(langs), "multi")
    assert meta["language"] == ["de", "ja", "fr"]  # most texts first: de 6+6, ja 6+3, fr 3
    assert report["counts"]["language"] == {"query": {"de": 6, "ja": 6}, "positive": {"de": 6, "fr": 3, "ja": 3}}
    readme = (tmp_path / "multi" / "README.md").read_text(encoding="utf-8")
    assert "**language**" in readme, "the counts section shows them"


def test_records_without_a_language_keep_the_card_as_it_was(tmp_path):
    meta, report = _export(tmp_path, _records([(None, None)] * 8), "plain")
    assert meta["language"] == ["en"] and "language" not in report["counts"]
    meta, _ = _export(tmp_path, _records([(None, None)] * 8), "declared", "fr")
    assert meta["language"] == ["fr"]
    mixed, _ = _export(tmp_path, _records([(None, None)] * 4 + [("sw", None)] * 4), "mixed")
    assert mixed["language"] == ["sw", "en"], "rows that say nothing are --language's"
    rows = [json.loads(line) for line in (tmp_path / "plain.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all("language" not in r and "positive_language" not in r for r in rows)


def test_the_languages_survive_filter(tmp_path):
    from curate.filter.main import FilterOptions, run_filter

    recs = _records([("de", None)] * 3 + [("ja", "ko")] * 3)
    path = write_jsonl(tmp_path / "gen.jsonl", (r.to_dict() for r in recs))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: light\nsteps:\n  - heuristics: {}\n", encoding="utf-8")
    run_filter(FilterOptions(inp=str(path), out=str(tmp_path / "filtered"), recipe=str(recipe), plots=False))
    text = (tmp_path / "filtered" / "filtered.jsonl").read_text(encoding="utf-8")
    kept = [json.loads(line) for line in text.splitlines()]
    assert [(r["language"], r.get("positive_language")) for r in kept] == \
           [(r.language, r.positive_language) for r in recs]
