"""The documentation: the mkdocs site builds in strict mode (so a broken link, a missing anchor, a
page left out of the nav or a missing included file fails), and README.md stays a short entrance
whose first code block is the two set-up commands and whose relative links all resolve."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_README_BYTES = 12_000

# [text](target) and [text](target "title"); images too. Reference-style definitions: [id]: target
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1\s*$", re.S | re.M)


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _without_code(text: str) -> str:
    """The text with fenced blocks and inline code removed: links inside them are not links."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def test_mkdocs_build_strict(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")  # mkdocs-material's end-of-life banner
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()


def test_readme_is_short():
    size = README.stat().st_size
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes; keep it under {MAX_README_BYTES} (move detail to docs/)"


def test_readme_starts_with_the_two_setup_commands():
    first = FENCE.search(_readme())
    assert first, "README.md has no code block"
    lines = [line.strip() for line in first.group(2).splitlines() if line.strip()]
    assert lines == ["make demo", "make test"], f"README.md's first code block is {lines}"


def test_readme_relative_links_exist():
    text = _without_code(_readme())
    targets = INLINE_LINK.findall(text) + REFERENCE_LINK.findall(text)
    relative = []
    for target in targets:
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or target.startswith(("#", "mailto:")):
            continue  # a web address, or an anchor inside the README itself
        relative.append(unquote(parts.path))
    assert relative, "README.md links to no file; it should lead into docs/"
    missing = sorted({path for path in relative if not (ROOT / path).exists()})
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_leads_to_every_page_of_the_manual():
    """The README's list of the docs names every page of docs/ (a new page is found from the entrance)."""
    linked = {unquote(urlsplit(t).path) for t in INLINE_LINK.findall(_without_code(_readme()))}
    pages = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")
             if "examples" not in p.parts and p.name != "index.md"}
    missing = sorted(pages - linked)
    assert not missing, f"README.md's Documentation list leaves out: {missing}"


def test_the_docs_say_how_curate_gets_on_the_path_before_they_type_it():
    """``make`` installs ``curate`` into .venv, which is not on a newcomer's PATH: the README and the
    getting-started page say to activate it before their first bare ``curate`` command, and so
    does the demo's last line."""
    for page in (README, ROOT / "docs" / "getting-started.md"):
        text = page.read_text(encoding="utf-8")
        bare = min(block.start() for block in FENCE.finditer(text) if re.search(r"^curate ", block.group(2), re.M))
        assert "source .venv/bin/activate" in text[:bare], f"{page.name}: `curate` typed before .venv is activated"
    demo = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "activate" in demo
