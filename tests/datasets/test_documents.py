"""Issue 23, item 1: the document reader (``curate/datasets/documents.py``) cuts a BEIR folder,
a corpus JSONL or a folder of .txt/.md/.html files into ``DOC#k`` passages, and the corpus
reader it shares with every stage (``curate/datasets/corpus.py``) still gives what it gave before.

Issue 32: what an untidy folder holds (binary and empty files, stray bytes, unclosed HTML, front
matter, blobs, links out of the folder, control characters in names) is named, mended or kept
out, and never reaches a passage, an id or a prompt unannounced."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl
from curate.datasets.corpus import read_corpus, read_corpus_entries
from curate.datasets.documents import MAX_WORD_CHARS, chunk_words, html_to_text, read_documents
from tests.helpers import SHARED_DATA, run_curate
from tests.mine_helpers import write_jsonl

SCIFACT = SHARED_DATA / "scifact"
needs_scifact = pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason="no SciFact copy")


def _write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _words(n: int, prefix: str = "w") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def _check_chunks(chunks: list[list[str]], words: list[str], max_words: int, overlap: int) -> None:
    """No chunk over max_words; each after the first opens with the last ``overlap`` words of
    the one before; the chunks less their overlaps are the document's words, in order."""
    assert all(0 < len(c) <= max_words for c in chunks)
    for before, after in zip(chunks, chunks[1:]):
        assert after[:overlap] == before[len(before) - overlap:]
    rebuilt = chunks[0] + [w for c in chunks[1:] for w in c[overlap:]] if chunks else []
    assert rebuilt == words


# --------------------------------------------------------------------------- BEIR, JSONL


@pytest.fixture(scope="module")
def scifact():
    return read_documents(SCIFACT), read_corpus_entries(SCIFACT / "corpus.jsonl")


@needs_scifact
def test_scifact_gives_one_passage_per_short_abstract_and_splits_long_ones_with_the_overlap(scifact):
    docs, entries = scifact
    by_doc: dict[str, list] = {}
    for p in docs.passages:
        by_doc.setdefault(p.doc_id, []).append(p)
    assert list(by_doc) == [e.id for e in entries if e.text]  # DOC#k ids map back, in corpus order
    assert docs.files == 1 and docs.documents == len(by_doc) and docs.skipped == []
    long = 0
    for e in entries:
        passages = by_doc[e.id]
        assert [p.id for p in passages] == [f"{e.id}#{k}" for k in range(len(passages))]
        assert {(p.title, p.source) for p in passages} == {(" ".join(e.title.split()), f"corpus.jsonl:{e.line}")}
        words = e.text.split()
        if len(words) <= 200:
            assert len(passages) == 1 and passages[0].text == " ".join(words)
        else:
            long += 1
            assert len(passages) > 1
            chunks = [p.text.split() for p in passages]
            assert all(len(c[-40:]) == 40 for c in chunks)
            assert chunks[1][:40] == chunks[0][-40:]  # the overlap words really repeat
            _check_chunks(chunks, words, 200, 40)
    assert long > 100  # SciFact has many abstracts over 200 words: the split was exercised
    assert len(docs.passages) == 7727  # the figure reported for the defaults


def test_jsonl_keeps_titles_apart_names_lines_and_skips_entries_without_text(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join([
        json.dumps({"_id": "a", "title": "  Alpha   paper ", "text": "one two\n\nthree"}),
        "",
        json.dumps({"id": 7, "text": "seven words"}),  # 'id' and a number id
        json.dumps({"_id": "e", "title": "only a title", "text": "  "}),
        json.dumps({"_id": "n", "title": None, "text": "no title"}),
    ]) + "\n", encoding="utf-8")
    docs = read_documents(path)
    assert [(p.id, p.doc_id, p.title, p.text, p.source, p.k) for p in docs.passages] == [
        ("a#0", "a", "Alpha paper", "one two three", "docs.jsonl:1", 0),
        ("7#0", "7", "", "seven words", "docs.jsonl:3", 0),
        ("n#0", "n", "", "no title", "docs.jsonl:5", 0),
    ]
    assert [(s.path, s.reason) for s in docs.skipped] == [("docs.jsonl:4", "empty")]
    assert (docs.files, docs.documents) == (1, 3)


def test_a_beir_folder_reads_only_its_corpus(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "d1", "title": "T", "text": "body text"}])
    _write(tmp_path / "queries.jsonl", "not json at all\n")  # never read
    _write(tmp_path / "notes.txt", "a text file beside a corpus is not a document")
    docs = read_documents(tmp_path)
    assert [(p.id, p.title, p.text, p.source) for p in docs.passages] == [("d1#0", "T", "body text", "corpus.jsonl:1")]


def test_write_corpus_gives_a_beir_corpus_the_corpus_reader_reads(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"_id": "a", "title": "Title", "text": " ".join(_words(30))}])
    docs = read_documents(path, max_words=20, overlap_words=5)
    out = docs.write_corpus(tmp_path / "out" / "corpus.jsonl")
    rows = [obj for _, obj in read_jsonl(out)]
    assert rows == [{"_id": p.id, "title": "Title", "text": p.text, "source": "in.jsonl:1"} for p in docs.passages]
    assert read_corpus(out) == [(p.id, f"Title {p.text}") for p in docs.passages] and len(rows) == 2
    with pytest.raises(CurateError, match="is the input being read"):
        docs.write_corpus(path)
    assert read_corpus(path) == [("a", "Title " + " ".join(_words(30)))]  # left as it was
    report = docs.report()
    assert report == {"path": str(path), "files": 1, "documents": 1, "passages": 2, "ignored": 0,
                      "skipped": [], "skipped_by_reason": {}, "replaced": [], "max_words": 20, "overlap_words": 5}


# ------------------------------------------------------------------------------- folders


HTML = """<!DOCTYPE html><html><head><title> Install
  guide </title><style>body { color: red }</style><meta charset="utf-8"></head>
<body><script>var hidden = "script words";</script>
<h1>Installing</h1><p>Run the   installer
then restart.</p><div>Second &amp; last<br>line</div>
<ul><li>one</li><li>two</li></ul><table><tr><td>cell a</td><td>cell b</td></tr></table></body></html>"""


def test_a_folder_of_txt_md_html_is_read_recursively_in_path_order(tmp_path):
    _write(tmp_path / "b.txt", "Plain text.\n\nSecond paragraph.")
    _write(tmp_path / "a.md", "Intro line.\n\n```sh\n# not a title\n```\n# Real Title #\n\nBody *text*.")
    _write(tmp_path / "guides" / "install.html", HTML)
    _write(tmp_path / "guides" / "deep" / "x.htm", "<p>deep page</p>")
    _write(tmp_path / "manual.pdf", b"%PDF-1.4 \x00\x01")
    _write(tmp_path / ".git" / "notes.txt", "hidden folders are not entered")
    docs = read_documents(tmp_path)
    assert [(p.id, p.title, p.text, p.source) for p in docs.passages] == [
        ("a#0", "Real Title", "Intro line. ```sh # not a title ``` Body *text*.", "a.md"),
        ("b#0", "", "Plain text. Second paragraph.", "b.txt"),
        ("guides/deep/x#0", "", "deep page", "guides/deep/x.htm"),
        ("guides/install#0", "Install guide",
         "Installing Run the installer then restart. Second & last line one two cell a cell b",
         "guides/install.html"),
    ]
    assert (docs.files, docs.documents, docs.ignored, docs.skipped) == (4, 4, 1, [])


def test_html_drops_script_style_head_and_makes_blocks_paragraphs():
    title, text = html_to_text(HTML)
    assert title == "Install guide"
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]
    assert paragraphs == ["Installing", "Run the installer then restart.", "Second & last", "line",
                          "one", "two", "cell a cell b"]
    assert "script words" not in text and "color" not in text and "charset" not in text


def test_html_paragraphs_drive_the_chunking(tmp_path):
    paras = [" ".join(_words(6, f"p{i}_")) for i in range(3)]
    _write(tmp_path / "page.html", "<html><body>" + "".join(f"<p>{p}</p>" for p in paras) + "</body></html>")
    docs = read_documents(tmp_path / "page.html", max_words=12, overlap_words=0)
    assert [p.text for p in docs.passages] == [f"{paras[0]} {paras[1]}", paras[2]]


def test_a_single_text_file_is_one_document_named_by_its_stem(tmp_path):
    path = _write(tmp_path / "readme.md", "\ufeff# Read me\n\nHello there.")  # a BOM is read past
    docs = read_documents(path)
    assert [(p.id, p.title, p.text, p.source) for p in docs.passages] == [
        ("readme#0", "Read me", "Hello there.", "readme.md")]


def test_the_same_input_gives_the_same_passages_ids_and_order(tmp_path):
    rng = random.Random(3)
    for i in rng.sample(range(40), 40):  # written in shuffled order
        text = "\n\n".join(" ".join(_words(rng.randint(1, 30), f"d{i}p{j}_")) for j in range(rng.randint(1, 6)))
        _write(tmp_path / f"sub{i % 3}" / f"doc{i:02d}.txt", text)
    first, second = read_documents(tmp_path, 25, 5), read_documents(tmp_path, 25, 5)
    assert first.passages == second.passages
    sources = [p.source for p in first.passages]
    assert sources == sorted(sources)
    assert len({p.id for p in first.passages}) == len(first.passages)


# ------------------------------------------------------------------------------ chunking


def test_whole_paragraphs_are_packed_while_they_fit():
    paras = [_words(5, "a"), _words(4, "b"), _words(6, "c"), _words(3, "d")]
    text = "\n\n".join(" ".join(p) for p in paras)
    chunks = chunk_words(text, 10, 2)
    # a+b fit (9); c would make 15, and fits whole after the overlap (2 + 6), so it opens the next
    assert chunks == [paras[0] + paras[1], paras[1][-2:] + paras[2], paras[2][-2:] + paras[3]]
    assert chunk_words("x y\n\n\n  \n\nz", 10, 2) == [["x", "y", "z"]]  # within max_words: one passage


def test_a_long_paragraph_is_cut_on_words_with_the_overlap():
    words = _words(25)
    chunks = chunk_words("   ".join(words), 10, 3)
    assert chunks == [words[0:10], words[7:17], words[14:24], words[21:25]]
    short = _words(2, "s")
    chunks = chunk_words(" ".join(short) + "\n\n" + " ".join(words), 10, 3)  # the long one fills the short
    assert chunks[0] == short + words[:8]
    _check_chunks(chunks, short + words, 10, 3)


@pytest.mark.parametrize("max_words,overlap", [(1, 0), (2, 1), (5, 0), (7, 3), (20, 19), (50, 10)])
def test_no_passage_is_over_max_words_and_every_word_is_covered(max_words, overlap):
    rng = random.Random(max_words * 100 + overlap)
    for _ in range(60):
        paras = [_words(rng.randint(0, 3 * max_words), f"p{j}_") for j in range(rng.randint(1, 8))]
        text = "\n\n".join(" ".join(p) + rng.choice(["", " ", "\n"]) for p in paras)
        _check_chunks(chunk_words(text, max_words, overlap), [w for p in paras for w in p], max_words, overlap)


# ------------------------------------------------------------------------------ bad input


def test_unreadable_files_are_skipped_counted_and_named(tmp_path):
    _write(tmp_path / "good.txt", "readable words")
    _write(tmp_path / "bin.txt", b"PK\x03\x04\x00\x00 zip bytes")
    _write(tmp_path / "latin.md", "caf\u00e9 cr\u00e8me".encode("latin-1"))
    _write(tmp_path / "empty.txt", "")
    _write(tmp_path / "blank.md", " \n\n\t\n")
    _write(tmp_path / "bom.txt", b"\xef\xbb\xbfwith a BOM")
    _write(tmp_path / "shell.html", "<html><head><title>Only a title</title></head><body> </body></html>")
    docs = read_documents(tmp_path)
    assert [p.id for p in docs.passages] == ["bom#0", "good#0", "latin#0"]  # latin.md: its bytes replaced
    assert docs.passages[0].text == "with a BOM"
    assert [(s.path, s.reason) for s in docs.skipped] == [
        ("bin.txt", "binary"), ("blank.md", "empty"), ("empty.txt", "empty"), ("shell.html", "empty")]
    assert docs.report()["skipped_by_reason"] == {"binary": 1, "empty": 3}


def test_a_folder_with_nothing_readable_is_one_line(tmp_path):
    with pytest.raises(CurateError) as err:
        read_documents(tmp_path)
    assert str(err.value) == f"{tmp_path}: no readable documents (0 skipped)"
    _write(tmp_path / "a.txt", b"\x00\x01")
    _write(tmp_path / "b.txt", "")
    _write(tmp_path / "c.pdf", "ignored")
    with pytest.raises(CurateError) as err:
        read_documents(tmp_path)
    assert str(err.value) == (f"{tmp_path}: no readable documents "
                              "(2 skipped: a.txt: binary; 1 ignored, not .txt/.md/.html/.htm)")
    assert "\n" not in str(err.value)
    with pytest.raises(CurateError, match=r"noise\.txt: no readable documents \(1 skipped: noise\.txt: binary"):
        read_documents(_write(tmp_path / "noise.txt", bytes(range(0x80, 0x100))))


def test_a_missing_path_and_an_unknown_file_type_are_one_line(tmp_path):
    with pytest.raises(CurateError) as err:
        read_documents(tmp_path / "nowhere")
    assert str(err.value) == f"{tmp_path / 'nowhere'}: no such file or folder"
    with pytest.raises(CurateError, match=r"book\.pdf: not a document file"):
        read_documents(_write(tmp_path / "book.pdf", "x"))


def test_a_duplicate_id_in_jsonl_names_both_lines(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"_id": "x", "text": "one"}, {"_id": "y", "text": "two"},
                                              {"_id": "x", "text": "three"}])
    with pytest.raises(CurateError) as err:
        read_documents(path)
    assert str(err.value) == f"{path}:3: duplicate _id 'x' (first at line 1)"
    with pytest.raises(CurateError, match=r"corpus\.jsonl: no documents"):
        read_documents(_write(tmp_path / "beir" / "corpus.jsonl", "\n"))


def test_two_files_with_one_doc_id_name_both(tmp_path):
    _write(tmp_path / "a.md", "markdown")
    _write(tmp_path / "a.txt", "text")
    with pytest.raises(CurateError) as err:
        read_documents(tmp_path)
    assert str(err.value) == f"{tmp_path}: 'a' is both a.md and a.txt"
    (tmp_path / "a.md").unlink()
    _write(tmp_path / "g" / "p.html", "<p>x</p>")
    _write(tmp_path / "g" / "p.htm", "<p>y</p>")
    with pytest.raises(CurateError, match=r": 'g/p' is both g/p\.htm and g/p\.html$"):
        read_documents(tmp_path)


@pytest.mark.parametrize("max_words,overlap", [(0, 0), (10, 10), (10, 11), (10, -1), (-5, 0), ("10", 2), (10, 2.5)])
def test_bad_max_words_or_overlap_is_one_line(tmp_path, max_words, overlap):
    _write(tmp_path / "a.txt", "words")
    with pytest.raises(CurateError, match=r"^max_words must be at least 1 and overlap_words from 0 to "
                                          r"max_words - 1 \(got max_words=.*, overlap_words=.*\)$"):
        read_documents(tmp_path, max_words, overlap)


# ------------------------------------------------------------------- read_corpus unchanged


def _read_corpus_before(path):
    """``read_corpus`` as it was before ``read_corpus_entries`` (commit e26c759), kept here verbatim
    in substance so the refactor is checked against the behaviour every stage relied on."""
    from curate.datasets.corpus import doc_text

    docs, first_line = [], {}
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise CurateError(f"{path}:{lineno}: a corpus line needs a string 'text'")
        key = "_id" if "_id" in obj else "id" if "id" in obj else None
        doc_id = str(obj[key]) if key else str(lineno)
        first = first_line.setdefault(doc_id, lineno)
        if first != lineno:
            raise CurateError(f"{path}:{lineno}: duplicate {key or 'id (its line number)'} {doc_id!r} "
                              f"(first at line {first})")
        docs.append((doc_id, doc_text(obj)))
    if not docs:
        raise CurateError(f"{path}: no documents")
    return docs


def test_read_corpus_gives_what_it_gave_before_on_a_small_file_with_titles(tmp_path):
    path = write_jsonl(tmp_path / "corpus.jsonl", [
        {"_id": "a", "title": "  Title A ", "text": " body  A \n"},
        {"_id": 5, "title": "", "text": "no title"},
        {"id": "b", "title": None, "text": "id key"},
        {"text": "no id at all", "title": "T"},
        {"_id": "c", "title": "only title", "text": ""},
        {"_id": "d", "text": "  "},
    ])
    assert read_corpus(path) == _read_corpus_before(path) == [
        ("a", "Title A body  A"), ("5", "no title"), ("b", "id key"), ("4", "T no id at all"),
        ("c", "only title"), ("d", "")]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"_id": "a", "text": "x"}, {"_id": "a", "text": "y"}])
    for reader in (read_corpus, _read_corpus_before):
        with pytest.raises(CurateError, match=r"bad\.jsonl:2: duplicate _id 'a' \(first at line 1\)"):
            reader(bad)
    no_text = write_jsonl(tmp_path / "no_text.jsonl", [{"_id": "a", "title": "x"}])
    with pytest.raises(CurateError, match=r"no_text\.jsonl:1: a corpus line needs a string 'text'"):
        read_corpus(no_text)
    number_title = write_jsonl(tmp_path / "number_title.jsonl", [{"_id": "a", "title": 5, "text": "x"}])
    with pytest.raises(CurateError, match=r"number_title\.jsonl:1: a corpus line's 'title' must be a string"):
        read_corpus(number_title)  # before: an AttributeError traceback


@needs_scifact
def test_read_corpus_gives_what_it_gave_before_on_scifact():
    path = SCIFACT / "corpus.jsonl"
    assert read_corpus(path) == _read_corpus_before(path)


# --------------------------------------------------------------------- issue 32: untidy folders


def _skipping_folder(folder: Path) -> Path:
    _write(folder / "good.txt", "readable words")
    _write(folder / "a.bin.txt", b"\x7fELF\x00\x01\x02")
    _write(folder / "b.md", "")
    _write(folder / "c.html", "<html><head><title>t</title></head><body></body></html>")
    _write(folder / "d.txt", " \n")
    return folder


def test_skipped_files_are_named_in_the_report_and_one_summary_line(tmp_path):
    docs = read_documents(_skipping_folder(tmp_path))
    assert docs.report()["skipped"] == [{"path": "a.bin.txt", "reason": "binary"}, {"path": "b.md", "reason": "empty"},
                                        {"path": "c.html", "reason": "empty"}, {"path": "d.txt", "reason": "empty"}]
    (line,) = docs.notes(report="report.json")
    assert line == (f"{tmp_path}: skipped 4 files: a.bin.txt (binary), b.md (empty), c.html (empty), "
                    "+1 more (see report.json)")
    assert read_documents(tmp_path / "good.txt").notes() == []  # nothing to say when all was read


def test_generate_from_corpus_names_skipped_files_in_report_json_and_on_stderr(tmp_path, srv):
    docs = _skipping_folder(tmp_path / "docs")
    out = tmp_path / "out"
    proc = run_curate("generate", "--from-corpus", str(docs), "--out", str(out), "--base-url", srv.base_url,
                      "--model", "m", "--max-retries", "0", "--max-reasks", "0", "--timeout", "10",
                      env={"OPENAI_API_KEY": "fake-key", "NO_COLOR": "1", "COLUMNS": "300",
                           "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "home" / ".cache")})
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    reader = report["families"]["from-corpus"]["documents"]
    assert [(s["path"], s["reason"]) for s in reader["skipped"]] == [
        ("a.bin.txt", "binary"), ("b.md", "empty"), ("c.html", "empty"), ("d.txt", "empty")]
    lines = [ln for ln in proc.stderr.splitlines() if "skipped 4 files" in ln]
    assert len(lines) == 1 and "a.bin.txt (binary), b.md (empty)" in lines[0] and "+1 more" in lines[0], proc.stderr


def test_a_stray_non_utf8_byte_is_replaced_and_counted_not_the_file_dropped(tmp_path):
    _write(tmp_path / "latin.md", "# Caf\u00e9\n\nCr\u00e8me br\u00fbl\u00e9e for everyone.".encode("latin-1"))
    _write(tmp_path / "ok.txt", "all fine")
    _write(tmp_path / "image.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")  # NULs: binary
    _write(tmp_path / "noise.txt", bytes(range(0x80, 0x100)) * 4)  # no NUL, nothing decodes: binary
    docs = read_documents(tmp_path)
    assert [(p.id, p.title, p.text) for p in docs.passages] == [
        ("latin#0", "Caf\ufffd", "Cr\ufffdme br\ufffdl\ufffde for everyone."), ("ok#0", "", "all fine")]
    assert [(r.path, r.bytes) for r in docs.replaced] == [("latin.md", 4)]
    assert docs.report()["replaced"] == [{"path": "latin.md", "bytes": 4}]
    assert [(s.path, s.reason) for s in docs.skipped] == [("image.txt", "binary"), ("noise.txt", "binary")]
    assert docs.notes()[1] == f"{tmp_path}: replaced 4 bytes that are not UTF-8 with U+FFFD in 1 file: latin.md (4 bytes)"


@pytest.mark.parametrize("page", [
    "<html><head><title>T</title><p>body text</p></html>",  # head never closed
    "<head><title>T</title><meta charset=utf-8>\nbody text",  # text after the head's tags
    "<title>T</title><div>body text</div>",  # neither head nor body tags
    "<html><head><title>T</title><script>x = 'no'</script><style>p {}</style><h1>body text</h1>",
    "<html><head><title>T</head><body>body text",  # title and head left open
])
def test_html_keeps_its_body_text_whether_or_not_head_and_body_are_closed(page):
    title, text = html_to_text(page)
    assert (title, " ".join(text.split())) == ("T", "body text")


def test_markdown_front_matter_is_not_text_and_its_title_is_the_title(tmp_path):
    _write(tmp_path / "yaml.md", '---\ntitle: "Deploying: a guide"\napi_key: sk-secret-123\ntags: [a, b]\n---\n'
                                 "# Deploying: a guide\n\nRun it.\n")
    _write(tmp_path / "toml.md", "+++\ntitle = 'Tuning'  # comment\npassword = \"hunter2\"\n+++\n\nTune it.\n")
    _write(tmp_path / "plain.md", "---\n\nA page that opens with a rule.\n\n---\n\nMore.\n")  # no front matter
    _write(tmp_path / "heading.md", "---\nauthor: me\n---\n# From the heading\n\nBody.\n")
    docs = read_documents(tmp_path)
    assert [(p.id, p.title, p.text) for p in docs.passages] == [
        ("heading#0", "From the heading", "Body."),
        ("plain#0", "", "--- A page that opens with a rule. --- More."),
        ("toml#0", "Tuning", "Tune it."),
        ("yaml#0", "Deploying: a guide", "Run it."),
    ]
    assert not any(s in p.text + p.title for p in docs.passages for s in ("sk-secret", "hunter2", "api_key", "author"))


def test_an_unbroken_blob_is_cut_so_no_passage_outgrows_the_character_cap(tmp_path):
    rng = random.Random(5)
    blob = "".join(rng.choice("abcdef0123456789") for _ in range(2_000_000))
    _write(tmp_path / "dump.txt", f"Header line.\n\n{blob}\n\nTrailer.")
    docs = read_documents(tmp_path, max_words=200, overlap_words=40)
    cap = 200 * (MAX_WORD_CHARS + 1) - 1
    assert max(len(p.text) for p in docs.passages) <= cap < 30_000
    assert all(len(p.text.split()) <= 200 for p in docs.passages)
    pieces = [w for p in docs.passages[:1] for w in p.text.split()] + [
        w for p in docs.passages[1:] for w in p.text.split()[40:]]
    assert "".join(pieces) == "Headerline." + blob + "Trailer."  # every character kept, in order
    title = read_documents(_write(tmp_path / "t.md", "# " + "x" * 10_000 + "\n\nbody"), 20, 5).passages[0].title
    assert len(title) <= 20 * (MAX_WORD_CHARS + 1) - 1  # a title goes with every passage: held to the cap too


@pytest.mark.parametrize("max_words,overlap", [(1, 0), (3, 1), (20, 5)])
def test_long_runs_are_cut_into_pieces_and_the_caps_hold(max_words, overlap):
    rng = random.Random(max_words)
    for _ in range(30):
        words = ["x" * rng.choice([1, 5, MAX_WORD_CHARS, MAX_WORD_CHARS + 1, 3 * MAX_WORD_CHARS + 7])
                 for _ in range(rng.randint(1, 40))]
        chunks = chunk_words(" ".join(words), max_words, overlap)
        pieces = [w[i:i + MAX_WORD_CHARS] for w in words for i in range(0, len(w), MAX_WORD_CHARS)]
        _check_chunks(chunks, pieces, max_words, overlap)
        assert all(len(" ".join(c)) <= max_words * (MAX_WORD_CHARS + 1) - 1 for c in chunks)


def test_links_out_of_docs_are_skipped_and_named_links_inside_are_read(tmp_path):
    secrets = _write(tmp_path / "home" / ".env", "OPENAI_API_KEY=sk-live-secret")
    _write(tmp_path / "home" / "private" / "notes.txt", "private notes")
    docs_dir = tmp_path / "docs"
    _write(docs_dir / "guide.txt", "the guide")
    (docs_dir / "config.txt").symlink_to(secrets)
    (docs_dir / "private").symlink_to(tmp_path / "home" / "private", target_is_directory=True)
    (docs_dir / "alias.txt").symlink_to(docs_dir / "guide.txt")  # inside DOCS: fine
    docs = read_documents(docs_dir)
    assert [(p.id, p.text) for p in docs.passages] == [("alias#0", "the guide"), ("guide#0", "the guide")]
    assert [(s.path, s.reason) for s in docs.skipped] == [("config.txt", "link outside DOCS"),
                                                          ("private", "link outside DOCS")]
    assert "sk-live-secret" not in json.dumps([p.__dict__ for p in docs.passages])
    assert "config.txt (link outside DOCS)" in docs.notes()[0]


def test_control_characters_in_file_names_never_reach_an_id(tmp_path):
    _write(tmp_path / "tab\there.txt", "one")
    _write(tmp_path / "new\nline.md", "two")
    _write(tmp_path / "bell\x07.html", "<p>three</p>")
    _write(tmp_path / "plain name.txt", "four")  # printable names keep their ids exactly
    docs = read_documents(tmp_path)
    ids = [p.id for p in docs.passages]
    assert ids == ["bell%07#0", "new%0Aline#0", "plain name#0", "tab%09here#0"]
    assert [p.source for p in docs.passages] == ["bell%07.html", "new%0Aline.md", "plain name.txt", "tab%09here.txt"]
    assert all(s.isprintable() for p in docs.passages for s in (p.id, p.doc_id, p.source))
    assert [p.id for p in read_documents(tmp_path).passages] == ids  # stable
    _write(tmp_path / "tab%09here.txt", "a name that already reads like the escape")
    with pytest.raises(CurateError) as err:
        read_documents(tmp_path)
    assert str(err.value) in (f"{tmp_path}: 'tab%09here' is both {a!r} and {b!r}"
                              for a, b in [("tab\there.txt", "tab%09here.txt"), ("tab%09here.txt", "tab\there.txt")])
    assert "\n" not in str(err.value)


def test_control_characters_in_jsonl_ids_are_escaped_too(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"_id": "a\tb", "text": "x"}, {"_id": "plain", "text": "y"}])
    assert [p.id for p in read_documents(path).passages] == ["a%09b#0", "plain#0"]
    clash = write_jsonl(tmp_path / "clash.jsonl", [{"_id": "a\tb", "text": "x"}, {"_id": "a%09b", "text": "y"}])
    with pytest.raises(CurateError, match=r"clash\.jsonl:2: _id 'a%09b' reads as 'a%09b', as does 'a\\tb'$"):
        read_documents(clash)


def test_a_lone_surrogate_in_a_jsonl_id_is_escaped_not_a_crash(tmp_path):
    path = tmp_path / "s.jsonl"  # JSON may spell a lone surrogate; Python reads it as one
    path.write_text('{"_id": "a\\ud800b", "text": "x"}\n{"_id": "c\\udcffd", "text": "y"}\n', encoding="utf-8")
    ids = [p.id for p in read_documents(path).passages]
    assert ids == ["a%ED%A0%80b#0", "c%FFd#0"]  # U+DCFF is how os spells the byte 0xFF
    assert all(i.encode("utf-8") for i in ids), "every id can be written as UTF-8"


def test_blank_and_whitespace_only_entries_give_no_passage(tmp_path):
    """Issue 52's pattern upstream of holdout: the documents reader is what generate's corpus, and
    so holdout's, is made from; a blank or whitespace-only entry is named as skipped, never a passage
    (one would otherwise be held out, or bar other blank passages as near-duplicates of it)."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(e) for e in [
        {"_id": "a", "title": "T", "text": "Real text about glaciers and ice."},
        {"_id": "b", "title": "", "text": ""},
        {"_id": "c", "title": " ", "text": "  \n\t "},
        {"_id": "d", "title": "U", "text": "Another passage on volcanoes."}]) + "\n", encoding="utf-8")
    docs = read_documents(corpus)
    assert [p.id for p in docs.passages] == ["a#0", "d#0"]
    assert [(s.path, s.reason) for s in docs.skipped] == [("corpus.jsonl:2", "empty"), ("corpus.jsonl:3", "empty")]
