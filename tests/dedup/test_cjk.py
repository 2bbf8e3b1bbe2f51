"""Scripts written without spaces (Chinese, Japanese, Thai): MinHash, the copy guard and the
heuristics' length check measure them in characters (``curate.dedup.shingles.unspaced``).

Split on ``\\w+`` as spaced text is, a Chinese or Japanese sentence is one "word" up to its next
punctuation mark: two passages that differ in one character share no word 3-gram, a query that
copies half a sentence has fewer than 4 "words" and is never judged, and a 150-character passage
counts 3 words. Each test below fails that way under plain word splitting; English text keeps
exactly its old words, shingles and counts (the last tests).
"""

from __future__ import annotations

import numpy as np

from curate.core.records import Negative, Record
from curate.dedup import minhash as M
from curate.dedup.copies import CopyGuard
from curate.dedup.shingles import (chars_per_word, normalize, ngram_for, unspaced, word_count, word_shingles,
                                   words)
from curate.filter.base import FilterContext
from curate.filter.steps.heuristics import heuristics
from curate.filter.steps.minhash import minhash as minhash_step

# Three Japanese passages: B is A with two characters changed and one clause added at the end;
# C is about the same city, written anew.
JA_A = ("東京は日本の首都であり、政治と経済の中心地として知られている。江戸時代には江戸と呼ばれ、"
        "徳川幕府が置かれていた。明治維新の後に東京と改められ、現在では一千四百万人を超える人々が暮らしている。"
        "都内には多くの大学や研究機関があり、世界中から留学生が集まっている。")
JA_B = ("東京は日本の首都であり、政治と経済の中心地として広く知られている。江戸時代には江戸と呼ばれ、"
        "徳川幕府が置かれていた。明治維新の後に東京と改められ、現在では一千四百万人を超える人々が暮らしている。"
        "都内には多くの大学や研究機関があり、世界中から留学生が集まってくる。")
JA_C = ("東京の街は夜になっても明るく、深夜まで営業する飲食店が多い。地下鉄の路線は複雑だが、"
        "案内表示が充実しているので旅行者でも迷いにくい。春には上野公園の桜を見に大勢の人が訪れる。")
ZH_A = ("长城是中国古代的军事防御工程，东起山海关，西至嘉峪关，全长两万多公里。修建长城的历史可以追溯到春秋战国时期，"
        "秦始皇统一六国后把各段城墙连接起来。如今长城已经成为世界文化遗产，每年吸引大量游客前来参观。")
ZH_B = ("长城是中国古代的军事防御工程，东起山海关，西至嘉峪关，全长两万多公里。修建长城的历史可以追溯到春秋战国时代，"
        "秦始皇统一六国后把各段城墙连接起来。如今长城已经成为世界文化遗产，每年吸引大量游客前来参观。")
ZH_C = ("熊猫主要生活在中国四川、陕西和甘肃的山区，以竹子为主要食物。由于栖息地减少，熊猫曾经面临灭绝的危险，"
        "经过多年的保护工作，野生熊猫的数量逐渐回升。")


def record(rid: str, query: str, positive: str, negatives=(), num_words: int | None = None) -> Record:
    meta = {"placeholders": {"num_words": num_words}} if num_words else {}
    return Record(id=rid, task_type="short-long", task="t", query=query, positive=positive,
                  negatives=[Negative(text=t, level=1) for t in negatives], meta=meta)


def run(step, records, params, tmp_path, name):
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = name
    return step(records, params, ctx), ctx


def test_what_is_unspaced_is_a_property_of_the_text():
    assert unspaced(JA_A) and unspaced(ZH_A) and unspaced("กินข้าวแล้วหรือยัง")
    assert unspaced("Pythonのリスト内包表記とは何ですか")  # mostly Japanese letters, one Latin word
    for spaced in ("The word 東京 means eastern capital", "Straße über alles", "한국어는 띄어쓰기를 한다",
                   "Привет, мир", "", "123 456"):
        assert not unspaced(spaced), spaced
    # a character a word, a Latin word or a number still one; Thai keeps its vowel signs
    assert words("東京都庁のPython講座1400万人") == ["東", "京", "都", "庁", "の", "python", "講", "座", "1400", "万", "人"]
    assert words("กินข้าว") == ["กิ", "น", "ข้", "า", "ว"]
    assert chars_per_word(ZH_A) == 2.0 and ngram_for(ZH_A, 3) == 6 and ngram_for("some words", 3) == 3


def test_near_duplicate_japanese_and_chinese_passages_are_found_and_distinct_ones_are_not():
    texts = [JA_A, JA_B, JA_C, ZH_A, ZH_B, ZH_C]
    groups = M.find_duplicate_groups(texts, threshold=0.8)
    assert groups == [[0, 1], [3, 4]]
    sig = M.signatures(texts)
    assert M.jaccard(sig, 0, 1) >= 0.8 and M.jaccard(sig, 3, 4) >= 0.8
    assert M.jaccard(sig, 0, 2) < 0.2 and M.jaccard(sig, 3, 5) < 0.2
    # the vectorised hashing is still datasketch's MinHash over the reference shingles
    from datasketch import MinHash

    for t, row in zip(texts, sig):
        m = MinHash(num_perm=128, seed=1, hashfunc=M.shingle_hash32)
        m.update_batch([" ".join(s).encode() for s in word_shingles(t)])
        assert np.array_equal(m.hashvalues, row)


def test_the_minhash_step_drops_a_near_duplicate_chinese_positive(tmp_path):
    recs = [record("a", "长城有多长？", ZH_A), record("b", "长城是谁修建的？", ZH_B), record("c", "熊猫吃什么？", ZH_C)]
    kept, ctx = run(minhash_step, recs, {"fields": ["positive"], "keep": "first"}, tmp_path, "minhash")
    assert [r.id for r in kept] == ["a", "c"]
    (drop,) = ctx.rejections
    assert drop.id == "b" and drop.reason == "near-duplicate-positive" and drop.detail["kept"] == "a"


def test_a_japanese_query_copying_its_passage_is_caught_by_the_copy_guard(tmp_path):
    copied = "江戸時代には江戸と呼ばれ徳川幕府が置かれていた都市はどこですか"  # a clause of JA_A, made a question
    written = "日本の首都の昔の名前は何ですか"  # asks about the passage in its own words
    keyword = "徳川幕府"  # a keyword query: shares its words by design, never judged
    guard = CopyGuard(JA_A)
    share, n = guard.share(copied)
    assert share >= 0.5 and n == 8  # 4 words' worth of characters
    assert guard.share(written)[0] < 0.2
    assert guard.share(keyword) is None
    recs = [record("copied", copied, JA_A), record("written", written, JA_A), record("keyword", keyword, JA_A)]
    kept, ctx = run(heuristics, recs, {}, tmp_path, "heuristics")
    assert [r.id for r in kept] == ["written", "keyword"]
    (drop,) = ctx.rejections
    assert drop.id == "copied" and drop.reason == "query-mostly-from-positive" and drop.detail["containment"] >= 0.5


def test_a_japanese_query_copied_word_for_word_from_mid_sentence_is_query_copied(tmp_path):
    query = "明治維新の後に東京と改められ"  # inside a sentence of JA_A: no punctuation around it there
    kept, ctx = run(heuristics, [record("r", query, JA_A)], {"copy_containment": None}, tmp_path, "heuristics")
    assert kept == [] and ctx.rejections[0].reason == "query-word-for-word-in-document"


def test_the_length_check_counts_a_long_chinese_passage_in_word_equivalents(tmp_path):
    assert len(ZH_A) == 100 and word_count(ZH_A) == 46  # 92 Han characters / 2 per word
    short = "长城是中国古代的军事防御工程，东起山海关，西至嘉峪关，全长两万多公里。"  # 31 Han: 15 words
    recs = [record("long", "长城有多长？", ZH_A, num_words=60), record("short", "长城有多长？", short, num_words=60)]
    kept, ctx = run(heuristics, recs, {}, tmp_path, "heuristics")
    assert [r.id for r in kept] == ["long"]
    (drop,) = ctx.rejections
    assert drop.id == "short" and drop.reason == "length-off"
    assert drop.detail["words"] == 15 and drop.detail["unit"] == "word-equivalents"


def test_english_text_keeps_its_words_shingles_and_counts():
    text = "The quick brown fox, jumping over the lazy dog's 東京 back: twice!"
    assert words(text) == normalize(text).split()
    assert word_count(text) == len(normalize(text).split())
    toks = normalize(text).split()
    assert word_shingles(text, 3) == {tuple(toks[i:i + 3]) for i in range(len(toks) - 2)}
    guard = CopyGuard("the quick brown fox jumps over the lazy dog every morning")
    assert guard.share("the quick brown fox jumps high") == (2 / 3, 4)
