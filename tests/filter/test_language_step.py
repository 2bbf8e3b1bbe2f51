"""The ``language`` filter step: texts not in the language their record says go, with the
language expected and the one detected; records without a language pass untouched."""

from __future__ import annotations

import json

import pytest

from curate.core.errors import CurateError
from curate.core.records import Negative, Record
from curate.filter.base import FilterContext
from curate.filter.recipe import load_recipe
from curate.filter.steps.language import language, letters
from tests.filter.common import recipe_error
from tests.helpers import run_curate

DE_QUERY = "Wie entstehen die Gezeiten an der Nordseeküste?"
DE_POSITIVE = ("Die Gezeiten entstehen durch die Anziehungskraft des Mondes und der Sonne. An der Nordseeküste "
               "steigt und fällt das Wasser zweimal am Tag, im Wattenmeer oft um mehr als drei Meter.")
DE_NEGATIVE = ("Sturmfluten an der Nordsee entstehen, wenn starker Westwind das Wasser gegen die Küste drückt; "
               "die Deiche wurden deshalb nach 1962 erhöht.")
EN_OF_DE_QUERY = "How do the tides form on the North Sea coast?"  # the German query, translated
EN_POSITIVE = ("Tides are caused by the gravitational pull of the Moon and the Sun. On the North Sea coast the "
               "water rises and falls twice a day, in the Wadden Sea often by more than three metres.")
FR_NEGATIVE = "Les marées sont causées par l'attraction de la Lune et du Soleil sur les océans de la Terre."
JA_QUERY = "富士山の高さはどれくらいですか"
JA_POSITIVE = "富士山は静岡県と山梨県にまたがる活火山で、標高は三千七百七十六メートルです。日本で最も高い山として知られています。"
JA_NEGATIVE = "阿蘇山は熊本県にある活火山で、世界有数の大きなカルデラを持つことで知られています。"
ZH_QUERY = "长城是什么时候修建的？"
ZH_POSITIVE = "长城的修建始于春秋战国时期，秦始皇统一六国后把各段城墙连接起来，明朝时又进行了大规模的重修。"
ZH_NEGATIVE = "故宫位于北京市中心，是明清两代的皇家宫殿，现在是世界上规模最大的木质结构古建筑群之一。"


def rec(rid: str, query: str, positive: str, negatives=(), lang: str | None = "de",
        positive_language: str | None = None, family: str = "short-long") -> Record:
    return Record(id=rid, task_type=family, task="t", query=query, positive=positive, language=lang,
                  positive_language=positive_language, negatives=[Negative(text=t, level=1) for t in negatives])


def run(records, params=None, tmp_path=None):
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = "language"
    return language(records, params or {}, ctx), ctx


def test_wrong_language_query_positive_and_negatives_go_with_what_was_detected(tmp_path):
    recs = [
        rec("ok", DE_QUERY, DE_POSITIVE, [DE_NEGATIVE, EN_OF_DE_QUERY, FR_NEGATIVE]),
        rec("en-query", EN_OF_DE_QUERY, DE_POSITIVE, [DE_NEGATIVE]),
        rec("en-positive", DE_QUERY, EN_POSITIVE, [DE_NEGATIVE]),
    ]
    kept, ctx = run(recs, tmp_path=tmp_path)
    assert [r.id for r in kept] == ["ok"]
    assert [n.text for n in kept[0].negatives] == [DE_NEGATIVE]  # the right one stays
    drops = {(d.id, d.reason): d.detail for d in ctx.rejections}
    assert drops[("en-query", "query-wrong-language")]["detected"] == "en"
    assert drops[("en-positive", "positive-wrong-language")] | {"probability": 0, "expected_probability": 0} == {
        "field": "positive", "expected": "de", "detected": "en", "probability": 0, "expected_probability": 0}
    # a monolingual German record: English and French negatives are in no language of the record
    english = ctx.rejections[0]
    assert english.reason == "negative-wrong-language" and english.text == EN_OF_DE_QUERY
    english = english.detail
    assert english["index"] == 1 and english["detected"] == "en"
    assert english["probability"] >= 10 * english["expected_probability"]
    assert [d.detail["detected"] for d in ctx.rejections if d.id == "ok"] == ["en", "fr"]
    notes = ctx.notes["language"]
    assert notes["records_checked"] == 3 and notes["negatives_dropped"] == 2
    assert notes["wrong_languages"] == {"en": 3, "fr": 1}


def test_a_negative_in_the_query_language_of_a_cross_lingual_record_is_translated(tmp_path):
    # German queries, English passages (positive_language: en): the English translation of the German
    # query is in the negatives' language and stays; the German negative translates back: it goes
    r = rec("x", DE_QUERY, EN_POSITIVE, [EN_OF_DE_QUERY, DE_NEGATIVE, FR_NEGATIVE], positive_language="en")
    kept, ctx = run([r], tmp_path=tmp_path)
    assert [n.text for n in kept[0].negatives] == [EN_OF_DE_QUERY]
    assert [(d.reason, d.detail["detected"], d.detail["expected"]) for d in ctx.rejections] == [
        ("negative-translated", "de", "en"), ("negative-wrong-language", "fr", "en")]
    # and a bitext record whose positive is in the source language is a wrong positive
    kept, ctx = run([rec("b", DE_QUERY, DE_POSITIVE, positive_language="en", family="bitext")], tmp_path=tmp_path)
    assert kept == [] and ctx.rejections[0].reason == "positive-wrong-language"


def test_japanese_and_chinese_are_told_apart(tmp_path):
    recs = [rec("ja", JA_QUERY, JA_POSITIVE, [JA_NEGATIVE, ZH_NEGATIVE], lang="ja"),
            rec("zh", ZH_QUERY, ZH_POSITIVE, [ZH_NEGATIVE, JA_NEGATIVE], lang="zh"),
            rec("zh-ja", ZH_QUERY, JA_POSITIVE, [ZH_NEGATIVE], lang="zh")]
    kept, ctx = run(recs, tmp_path=tmp_path)
    assert [(r.id, [n.text for n in r.negatives]) for r in kept] == [("ja", [JA_NEGATIVE]), ("zh", [ZH_NEGATIVE])]
    assert [(d.id, d.reason, d.detail["detected"]) for d in ctx.rejections] == [
        ("ja", "negative-wrong-language", "zh"), ("zh", "negative-wrong-language", "ja"),
        ("zh-ja", "positive-wrong-language", "ja")]


def test_records_without_a_language_and_short_texts_are_untouched(tmp_path):
    plain = rec("plain", EN_OF_DE_QUERY, DE_POSITIVE, [FR_NEGATIVE], lang=None)
    before = plain.to_dict()
    short = rec("short", "Photosynthese", DE_POSITIVE, ["Energy", "東京"])  # under min_chars: not judged
    unknown = rec("unknown", EN_OF_DE_QUERY, EN_POSITIVE, lang="sd")  # Sindhi: the identifier does not know it
    kept, ctx = run([plain, short, unknown], tmp_path=tmp_path)
    assert kept == [plain, short, unknown] and kept[0] is plain and plain.to_dict() == before
    assert ctx.rejections == []
    notes = ctx.notes["language"]
    assert notes["records_without_language"] == 1 and notes["texts_too_short"] == 3
    assert notes["unknown_languages"] == {"sd": 2}
    assert letters("東京") == 6 and letters("iPhone 15!") == 6
    # none carries a language: nothing is judged and the identifier is never loaded
    kept, ctx = run([plain], tmp_path=tmp_path)
    assert kept == [plain] and ctx.notes["language"]["texts_judged"] == 0


def test_region_and_alias_codes_are_understood(tmp_path):
    kept, ctx = run([rec("r", DE_QUERY, DE_POSITIVE, lang="de-AT"), rec("n", "Hvordan dannes tidevannet langs kysten?",
                     "Tidevannet skyldes at månen og solen trekker på havet, og vannet stiger og synker to ganger "
                     "i døgnet langs hele kysten.", lang="nb")], tmp_path=tmp_path)
    assert [r.id for r in kept] == ["r", "n"] and ctx.notes["language"]["unknown_languages"] == {}


def test_parameters(tmp_path):
    kept, _ = run([rec("q", EN_OF_DE_QUERY, DE_POSITIVE)], {"fields": ["positive", "negatives"]}, tmp_path)
    assert len(kept) == 1  # the query is not judged
    assert "did you mean odds" in recipe_error(tmp_path / "r.yaml", "steps:\n  - language: {odd: 3}\n")
    assert "min_chars must be at least 1" in recipe_error(tmp_path / "r.yaml", "steps:\n  - language: {min_chars: 0}\n")
    assert "did you mean" in recipe_error(tmp_path / "r.yaml", "steps:\n  - language: {languages: [de, enn]}\n")
    with pytest.raises(CurateError):
        run([rec("q", DE_QUERY, DE_POSITIVE)], {"fields": ["title"]}, tmp_path)
    assert "fields must be among" in recipe_error(tmp_path / "r.yaml", "steps:\n  - language: {fields: title}\n")
    assert [s.name for s in load_recipe("multilingual").steps][:2] == ["heuristics", "language"]


def test_the_cli_filters_a_multilingual_file(tmp_path):
    inp = tmp_path / "in.jsonl"
    rows = [rec("ok", DE_QUERY, DE_POSITIVE, [DE_NEGATIVE, EN_OF_DE_QUERY]), rec("bad", EN_OF_DE_QUERY, DE_POSITIVE,
            [DE_NEGATIVE]), rec("plain", EN_OF_DE_QUERY, EN_POSITIVE, [FR_NEGATIVE], lang=None)]
    inp.write_text("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    recipe = tmp_path / "lang.yaml"
    recipe.write_text("steps:\n  - language: {}\n")
    out = tmp_path / "out"
    proc = run_curate("filter", "--in", str(inp), "--out", str(out), "--recipe", str(recipe))
    assert proc.returncode == 0, proc.stderr
    kept = [json.loads(line) for line in (out / "filtered.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["id"], len(r["negatives"])) for r in kept] == [("ok", 1), ("plain", 1)]
    assert kept[0]["language"] == "de" and "language" not in kept[1]
