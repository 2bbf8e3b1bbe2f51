"""``curate generate --languages``: a weighted pool of languages, one drawn per item.

The pool (data/languages.tsv), the parsing of ``--languages``, each item's own draw (its
other placeholders unchanged), the ids (unchanged without ``--languages``), the record's
typed ``language``/``positive_language`` fields, and real CLI runs against the scripted
server: the records carry the pool's languages in its proportions, the prompts name them,
bitext gets two different ones, and a bad value is a one-line error.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.core.records import Record, Task, read_records, stable_id
from curate.core.resources import resource_dir
from curate.generate.examples import Planning, make_item, plan_items
from curate.generate.languages import Pool, parse_languages, shipped_pool
from curate.llm.taskspec import list_families, load_spec
from tests.fake_llm_server import fake_llm_server
from tests.generate.test_faults import _env, run_cmd
from tests.helpers import assert_one_line_error, run_curate

TASKS = [Task(id=f"t{i}", task_type="short-long", task=f"Given a question about subject {i}, find answers.")
         for i in range(3)]
OPTED_IN = {"short-long": "pool", "long-short": "pool", "short-short": "pool", "long-long": "pool",
            "from-corpus": "pool", "from-corpus-multihop": "pool", "bitext": "pair",
            "reasoning": "pool", "instruction-negatives": "pool"}


# --------------------------------------------------------------------------- the pool


def test_the_shipped_pool_has_93_languages_english_weighted_most():
    pool = shipped_pool()
    assert (resource_dir("data") / "languages.tsv").is_file()
    assert len(pool.codes) == 93 == len(set(pool.codes))
    assert all(re.fullmatch(r"[a-z]{2,3}", c) for c in pool.codes)
    assert len({n.lower() for n in pool.names}) == 93
    weights = dict(zip(pool.codes, pool.weights))
    assert weights["en"] == max(weights.values()) and list(weights.values()).count(weights["en"]) == 1
    assert weights["de"] > weights["it"] > weights["sw"], "larger languages weigh more"
    assert set(weights.values()) == {8, 4, 2, 1}


def test_languages_by_code_or_name_any_case_take_the_pools_weights():
    pool = parse_languages("en, German,JA")
    assert pool.codes == ("en", "de", "ja") and pool.names == ("English", "German", "Japanese")
    assert pool.weights == (8, 4, 4)
    assert parse_languages("all") == shipped_pool()
    assert parse_languages(None) is None


@pytest.mark.parametrize("value, needles", [
    ("en,deu", ["unknown language 'deu'", "did you mean 'de' (German)"]),
    ("Japanse", ["did you mean 'ja' (Japanese)"]),
    ("xx", ["unknown language 'xx'"]),
    ("en,,de", ["empty entry"]),
    ("de,German", ["given twice"]),
    ("missing/langs.tsv", ["no such file"]),
])
def test_a_bad_value_is_one_clear_error(value, needles):
    with pytest.raises(CurateError) as e:
        parse_languages(value)
    assert "\n" not in str(e.value)
    for needle in needles:
        assert needle in str(e.value)


def test_a_weights_file_and_its_bad_lines(tmp_path):
    good = tmp_path / "w.tsv"
    good.write_text("# my pool\nde\t3\n\nFrench\t1.5\nyue\tCantonese\t2\n", encoding="utf-8")
    pool = parse_languages(str(good))
    assert pool == Pool(("de", "fr", "yue"), (3.0, 1.5, 2.0), ("German", "French", "Cantonese"))
    for n, (text, needle) in enumerate([("de\t0\n", "positive number"), ("de\tmany\n", "positive number"),
                                        ("de 3\n", "CODE<TAB>WEIGHT"), ("dx\t1\n", "unknown language 'dx'"),
                                        ("de\t1\nde\t2\n", "listed twice"),
                                        ("en-US\tEnglish\t1\n", "not a language code"),
                                        ("# nothing\n", "no languages")]):
        bad = tmp_path / f"bad{n}.tsv"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(CurateError) as e:
            parse_languages(str(bad))
        assert needle in str(e.value) and str(bad) in str(e.value)
        if needle != "no languages":
            assert f"{bad}:{text.count(chr(10))}:" in str(e.value), "names the file and its line"


def test_a_pool_file_with_a_byte_order_mark_huge_weights_or_a_folder_is_read_or_refused_in_one_line(tmp_path):
    bom = tmp_path / "bom.tsv"
    bom.write_bytes("\ufeffde\t1\nfr\t2\n".encode("utf-8"))  # as Windows editors save it
    assert parse_languages(str(bom)).codes == ("de", "fr")
    huge = tmp_path / "huge.tsv"
    huge.write_text("de\t1e308\nfr\t1e308\n", encoding="utf-8")  # each finite, their sum not
    folder = tmp_path / "pools"
    folder.mkdir()
    for value, needle in ((huge, "weights add up to more than a number can hold"), (folder, "is a folder")):
        proc = run_curate("generate", "--task", "short-long", "--out", str(tmp_path / "o"), "--languages", str(value),
                          "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
        assert_one_line_error(proc, str(value), needle)
        assert proc.returncode == 2, "a user's fault, not an internal error"
        assert not (tmp_path / "o").exists()


def test_draws_are_the_items_own_and_follow_the_weights():
    pool = parse_languages("en,de,ja")
    assert [pool.draw(s) for s in range(50)] == [pool.draw(s) for s in range(50)]
    got = Counter(pool.draw(s) for s in range(4000))
    assert abs(got["en"] / 4000 - 0.5) < 0.04 and abs(got["de"] / 4000 - 0.25) < 0.04


def test_pairs_are_two_different_languages_of_the_pool():
    pool = parse_languages("de,ja,fr")
    pairs = [pool.pair(s) for s in range(300)]
    assert all(a != b and {a, b} <= {"de", "ja", "fr"} for a, b in pairs)
    assert len(set(pairs)) == 6, "every direction occurs"
    one = parse_languages("sw")
    assert {one.pair(s) for s in range(40)} == {("sw", "en"), ("en", "sw")}, "one language goes with English"
    with pytest.raises(CurateError, match="bitext needs two languages"):
        parse_languages("en").pair(0)


# --------------------------------------------------------------------------- specs and items


def test_the_shipped_specs_that_take_part_and_their_templates_name_the_language():
    taking_part = {f: load_spec(f).languages for f in list_families() if load_spec(f).languages}
    assert OPTED_IN.items() <= taking_part.items()
    assert load_spec("sts").languages is None and load_spec("from-pairs").languages is None
    pool = parse_languages("de,ja")
    for family, mode in taking_part.items():  # every spec that takes part tells the model its language
        spec = load_spec(family)
        given = {"positive": "A passage.", "passages": ["A passage.", "Another one."]} if spec.inputs else {}
        item = make_item(spec, TASKS[0], 0, Planning(None, 0, languages=pool), given=given)
        variables = spec.generate.variables(item.seed)
        variables.update(task="t", n_negatives=spec.n_negatives, task_type=family, **item.given)
        text = spec.generate.task("example", lambda d: d).prompt(variables).messages[-1]["content"]
        names = {"de": "German", "ja": "Japanese", "en": "English"}
        assert names[item.language] in text, family
        if mode == "pair":
            assert item.positive_language not in (None, item.language)
            assert names[item.positive_language] in text
        else:
            assert item.positive_language is None


def test_a_bad_languages_key_in_a_spec_is_refused(tmp_path):
    raw = (resource_dir("tasks") / "short-long.yaml").read_text(encoding="utf-8")
    spec = tmp_path / "mine.yaml"
    spec.write_text(raw.replace("languages: pool", "languages: many"), encoding="utf-8")
    with pytest.raises(CurateError, match="'languages' must be pool"):
        load_spec(str(spec))


def test_ids_are_unchanged_without_languages_and_other_draws_stay_put():
    spec = load_spec("short-long")
    plain = plan_items(spec, TASKS, Planning(6, 3))
    assert [it.id for it in plain] == [stable_id("short-long", TASKS[i % 3].task, i // 3, 3, []) for i in range(6)]
    assert all(it.given == {} and it.language is None for it in plain)
    pooled = plan_items(spec, TASKS, Planning(6, 3, languages=parse_languages("de,ja")))
    assert not {it.id for it in plain} & {it.id for it in pooled}, "the pool is part of an item's id"
    other = plan_items(spec, TASKS, Planning(6, 3, languages=parse_languages("de,fr")))
    assert not {it.id for it in other} & {it.id for it in pooled}
    for it in pooled:  # the pool sets language and language_code; every other placeholder is drawn as without it
        drawn = spec.generate.variables(it.seed)
        assert set(it.given) == {"language", "language_code"} and "language" in drawn
        assert {**drawn, **it.given} == {**drawn, "language": it.given["language"], "language_code": it.language}
    sts = load_spec("sts")  # takes no part: same ids with or without the pool
    assert [it.id for it in plan_items(sts, TASKS, Planning(4, 0))] == \
           [it.id for it in plan_items(sts, TASKS, Planning(4, 0, languages=parse_languages("de")))]


def test_corpus_items_draw_the_query_language():
    from curate.core.progress import RunStats
    from curate.datasets.documents import read_documents
    from curate.generate.from_corpus import corpus_items

    docs = read_documents(Path(__file__).resolve().parents[2] / "data" / "demo")
    spec = load_spec("from-corpus")
    plain = corpus_items(spec, docs, TASKS[:1], Planning(5, 0), RunStats(stage="generate"))
    pooled = corpus_items(spec, docs, TASKS[:1], Planning(5, 0, languages=parse_languages("ja")), RunStats(stage="generate"))
    assert all(it.language is None and "language" not in it.given for it in plain)
    assert all(it.language == "ja" and it.given["language"] == "Japanese" for it in pooled)
    assert [it.given["positive"] for it in plain] == [it.given["positive"] for it in pooled]


# --------------------------------------------------------------------------- records


def test_record_language_fields_round_trip_and_are_left_out_when_unknown(tmp_path):
    plain = Record(id="a", task_type="short-long", task="t", query="q", positive="p")
    assert "language" not in plain.to_dict() and "positive_language" not in plain.to_dict()
    rec = Record(id="b", task_type="bitext", task="t", query="q", positive="p", language="de", positive_language="ja")
    d = rec.to_dict()
    assert d["language"] == "de" and d["positive_language"] == "ja"
    assert Record.from_dict(json.loads(json.dumps(d))) == rec
    for bad in ("DE", "de-AT", "", 7, "german"):
        with pytest.raises(ValueError, match="'language' must be a language code"):
            Record.from_dict({**d, "language": bad})
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({**d, "positive_language": "en_US"}) + "\n", encoding="utf-8")
    with pytest.raises(CurateError, match=r"r\.jsonl:1: .*'positive_language' must be a language code"):
        read_records(path)


# --------------------------------------------------------------------------- the CLI on the scripted server

PROMPT_LANGUAGE = re.compile(r"Everything is in (\w[\w ]*?) and needs")


def _cli(srv, tmp_path: Path, name: str, n: int, *extra: str, task: str = "short-long") -> list[str]:
    import sys

    tasks = tmp_path / "tasks.jsonl"
    if not tasks.exists():
        tasks.write_text("".join(json.dumps({"task": t.task}) + "\n" for t in TASKS), encoding="utf-8")
    return [sys.executable, "-m", "curate", "generate", "--task", task, "-n", str(n), "--out", str(tmp_path / name),
            "--base-url", srv.base_url, "--model", "fake", "--concurrency", "16", "--seed", "0",
            *(("--tasks-file", str(tasks)) if task == "short-long" else ()), *extra]


def _chi_square(got: Counter, shares: dict[str, float]) -> float:
    n = sum(got.values())
    return sum((got.get(c, 0) - n * p) ** 2 / (n * p) for c, p in shares.items())


CHI2_2DOF_P001 = 13.82  # chi-square, 2 degrees of freedom: exceeded by chance once in a thousand runs
CHI2_1DOF_P001 = 10.83


def test_cli_runs_draw_the_pools_languages_in_proportion_and_say_them(tmp_path):
    weights = tmp_path / "weights.tsv"
    weights.write_text("fr\t1\nde\t3\n", encoding="utf-8")
    with fake_llm_server() as srv:
        run = run_cmd(_cli(srv, tmp_path, "three", 400, "--languages", "en,de,ja"), tmp_path / "three",
                      tmp_path / "home")
        prompts = [r.body["messages"][-1]["content"] for r in srv.chat_requests]
        sent = len(prompts)
        two = run_cmd(_cli(srv, tmp_path, "file", 300, "--languages", str(weights)), tmp_path / "file",
                      tmp_path / "home")
        file_prompts = [r.body["messages"][-1]["content"] for r in srv.chat_requests[sent:]]
    recs = run.generated
    assert len(recs) == 400 and not run.failed
    langs = Counter(r["language"] for r in recs)
    assert set(langs) == {"en", "de", "ja"} and all("positive_language" not in r for r in recs)
    # en weighs 8, de and ja 4 each: half, a quarter, a quarter (uniform draws would score about 44)
    assert _chi_square(langs, {"en": 0.5, "de": 0.25, "ja": 0.25}) < CHI2_2DOF_P001, langs
    names = {"en": "English", "de": "German", "ja": "Japanese", "fr": "French"}
    asked = Counter(m.group(1) for p in prompts for m in [PROMPT_LANGUAGE.search(p)] if m)
    assert asked == Counter(names[c] for c in langs.elements()), "every prompt names its record's language"
    meta_seeds = {r["meta"]["seed"] for r in recs}
    assert len(meta_seeds) == 400

    got = Counter(r["language"] for r in two.generated)
    assert set(got) == {"fr", "de"} and sum(got.values()) == 300
    assert _chi_square(got, {"de": 0.75, "fr": 0.25}) < CHI2_1DOF_P001, got
    assert Counter(m.group(1) for p in file_prompts for m in [PROMPT_LANGUAGE.search(p)] if m) == \
           Counter(names[c] for c in got.elements())
    assert not {r["id"] for r in recs} & {r["id"] for r in two.generated}


def test_cli_default_ids_bitext_pairs_and_a_bad_value(tmp_path):
    with fake_llm_server() as srv:
        plain = run_cmd(_cli(srv, tmp_path, "plain", 6), tmp_path / "plain", tmp_path / "home")
        bitext = run_cmd(_cli(srv, tmp_path, "bitext", 30, "--languages", "de,ja,fr", task="bitext"),
                         tmp_path / "bitext", tmp_path / "home")
        bitext_prompts = [r.body["messages"][-1]["content"] for r in srv.chat_requests[6:]]
        proc = run_curate(*_cli(srv, tmp_path, "bad", 4, "--languages", "en,klingon")[3:], env=_env(tmp_path / "home"))
    # without --languages: the ids as they always were, and no language field
    assert [r["id"] for r in plain.generated] == [stable_id("short-long", TASKS[i % 3].task, i // 3, 0, [])
                                                  for i in range(6)]
    assert all("language" not in r and "positive_language" not in r for r in plain.generated)
    assert all(r["meta"]["placeholders"]["language"] == "English" for r in plain.generated)
    # bitext: a source and a different target, both from the pool, named in the prompt
    recs = bitext.generated
    assert len(recs) == 30
    assert all(r["language"] != r["positive_language"] and {r["language"], r["positive_language"]} <= {"de", "ja", "fr"}
               for r in recs)
    names = {"de": "German", "ja": "Japanese", "fr": "French"}
    said = Counter(re.search(r'"query": one sentence in (\w+) about', p).group(1) for p in bitext_prompts)
    assert said == Counter(names[r["language"]] for r in recs)
    said = Counter(re.search(r"translation of the query into (\w+)\.", p).group(1) for p in bitext_prompts)
    assert said == Counter(names[r["positive_language"]] for r in recs)
    # a bad value: one line, the usual exit code for a user's error, nothing written
    assert proc.returncode == 2
    assert_one_line_error(proc, "unknown language 'klingon'")
    assert not (tmp_path / "bad" / "generated.jsonl").exists()


def test_a_family_that_does_not_take_part_says_so_and_keeps_its_language(tmp_path):
    """``--languages`` with sts (its spec has no ``languages`` key): one warning line naming it,
    and its records carry no language, rather than looking multilingual."""
    with fake_llm_server() as srv:
        run = run_cmd(_cli(srv, tmp_path, "sts", 3, "--languages", "de", task="sts"), tmp_path / "sts",
                      tmp_path / "home")
    warned = [line for line in run.output.splitlines() if "--languages" in line]
    assert len(warned) == 1 and "sts does not take part" in warned[0], run.output
    assert len(run.generated) == 3 and all("language" not in r for r in run.generated)
