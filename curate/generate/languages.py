"""The languages ``curate generate --languages`` draws from, one per item.

E5-mistral asked for its synthetic data in the languages of XLM-R's pretraining corpus,
drawing more often the ones with more text. ``data/languages.tsv`` ships that pool (code,
English name, weight; its header gives the weight rule). ``--languages`` picks from it:

* ``en,de,ja``: these languages (codes or English names, any case), with the pool's weights;
* ``all``: the whole pool with its weights;
* a file: one ``CODE<TAB>WEIGHT`` line per language (``CODE<TAB>NAME<TAB>WEIGHT`` too, the
  pool's own layout, which also adds a language the pool lacks); ``#`` starts a comment.

A spec takes part with its ``languages`` key: ``pool`` (the item's language replaces its
``language`` placeholder) or ``pair`` (a source and a different target language replace
``language_pair``, for bitext). Each item draws with a generator of its own, seeded from the
item's seed, so its other placeholders are drawn exactly as without ``--languages``.
"""

from __future__ import annotations

import difflib
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.records import LANGUAGE_CODE
from curate.core.resources import resource_dir

POOL_FILE = "languages.tsv"
ENGLISH = "en"
SPEC_MODES = ("pool", "pair")  # a spec's ``languages`` key


@dataclass(frozen=True)
class Pool:
    """Languages to draw from, each with its weight (any positive numbers; their sum is 1 share)."""

    codes: tuple[str, ...]
    weights: tuple[float, ...]
    names: tuple[str, ...]  # the English name of each code, what a prompt asks for

    def name(self, code: str) -> str:
        """The English name of ``code`` (of this pool, else of the shipped one: English, which
        ``pair`` may add)."""
        pool = self if code in self.codes else shipped_pool()
        return pool.names[pool.codes.index(code)]

    def key(self) -> list[list[Any]]:
        """The pool as an item's id sees it: codes and weights (a run with another pool gets other ids)."""
        return [[c, _plain_number(w)] for c, w in zip(self.codes, self.weights)]

    def draw(self, seed: int) -> str:
        """The language of the item with this seed (the same on every run)."""
        return _rng(seed).choices(self.codes, self.weights)[0]

    def pair(self, seed: int) -> tuple[str, str]:
        """(source, target): two different languages for the item with this seed. A pool of one
        language pairs it with English, in a direction drawn per item."""
        rng = _rng(seed)
        if len(self.codes) == 1:
            only = self.codes[0]
            if only == ENGLISH:
                raise CurateError("--languages en: bitext needs two languages (a sentence and its translation); "
                                  "give at least one more, e.g. --languages en,de")
            return (only, ENGLISH) if rng.random() < 0.5 else (ENGLISH, only)
        source = rng.choices(self.codes, self.weights)[0]
        rest = [(c, w) for c, w in zip(self.codes, self.weights) if c != source]
        target = rng.choices([c for c, _ in rest], [w for _, w in rest])[0]
        return source, target


def _rng(seed: int) -> random.Random:
    from curate.llm.client import derive_seed

    return random.Random(derive_seed(seed, "language"))


def _plain_number(w: float) -> int | float:
    return int(w) if float(w).is_integer() else w


@lru_cache(maxsize=None)
def shipped_pool() -> Pool:
    """``data/languages.tsv``: the 93 languages with their weights."""
    path = resource_dir("data") / POOL_FILE
    if not path.is_file():
        raise CurateError(f"the language pool is missing from this installation (looked for {path})")
    return read_pool_file(path, shipped=True)


def pool_index() -> dict[str, str]:
    """Every spelling ``--languages`` accepts (code, English name; lower case) -> its code."""
    pool = shipped_pool()
    index = {c: c for c in pool.codes}
    index.update({n.lower(): c for c, n in zip(pool.codes, pool.names)})
    return index


def lookup(value: str, where: str = "--languages") -> str:
    """The code of a language given by code or English name; unknown ones get a suggestion."""
    wanted = " ".join(value.split()).lower()
    index = pool_index()
    if wanted in index:
        return index[wanted]
    close = [wanted[:2]] if len(wanted) == 3 and wanted[:2] in index else []  # deu, fra, eng: a 639-2/3 code
    if not close and len(wanted) > 3:  # a misspelt name (a code that close to another is a guess)
        close = difflib.get_close_matches(wanted, [k for k in index if len(k) > 3], n=1, cutoff=0.6)
    hint = ""
    if close:
        code = index[close[0]]
        hint = f"; did you mean {code!r} ({shipped_pool().name(code)})?"
    raise CurateError(f"{where}: unknown language {value!r}{hint} (codes or English names of "
                      f"data/languages.tsv, e.g. en, de, Japanese; or 'all', or a file of CODE<TAB>WEIGHT lines)")


def parse_languages(value: str | None) -> Pool | None:
    """The pool ``--languages VALUE`` asks for; None without one (today's behaviour)."""
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        raise CurateError("--languages: give language codes (en,de,ja), 'all', or a file of CODE<TAB>WEIGHT lines")
    if text.lower() == "all":
        return shipped_pool()
    path = Path(text)
    if path.is_file() and text.lower() not in pool_index():  # a file named "de" does not hide German
        return read_pool_file(path)
    if path.is_dir() and text.lower() not in pool_index():
        raise CurateError(f"--languages {text}: is a folder; give a file of CODE<TAB>WEIGHT lines")
    if path.suffix.lower() in (".tsv", ".txt") or "/" in text or "\\" in text:
        raise CurateError(f"--languages {text}: no such file")
    codes: list[str] = []
    for part in text.split(","):
        if not part.strip():
            raise CurateError(f"--languages {text!r}: an empty entry between commas")
        code = lookup(part.strip())
        if code in codes:
            raise CurateError(f"--languages {text!r}: {part.strip()!r} is given twice")
        codes.append(code)
    pool = shipped_pool()
    return Pool(tuple(codes), tuple(pool.weights[pool.codes.index(c)] for c in codes),
                tuple(pool.names[pool.codes.index(c)] for c in codes))


def read_pool_file(path: Path, shipped: bool = False) -> Pool:
    """A pool from a file of ``CODE<TAB>WEIGHT`` or ``CODE<TAB>NAME<TAB>WEIGHT`` lines (blank
    lines and ``#`` comments skipped); a bad line is one error naming file and line. A
    two-column line names a language of the shipped pool (by code or name), whose own file
    (``shipped``) has three columns throughout."""
    from curate.core.yamlfile import read_utf8_text

    codes: list[str] = []
    weights: list[float] = []
    names: list[str] = []
    for lineno, line in enumerate(read_utf8_text(path).splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = [c.strip() for c in line.split("\t")]
        where = f"{path}:{lineno}"
        if len(cols) not in (2, 3) or not all(cols):
            raise CurateError(f"{where}: expected CODE<TAB>WEIGHT (or CODE<TAB>NAME<TAB>WEIGHT), got {line.strip()!r}")
        try:
            weight = float(cols[-1])
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight) or weight <= 0:
            raise CurateError(f"{where}: the weight must be a positive number, got {cols[-1]!r}")
        if len(cols) == 3:
            code, name = cols[0].lower(), " ".join(cols[1].split())
            if not LANGUAGE_CODE.fullmatch(code):  # what a record's language may hold
                raise CurateError(f"{where}: {cols[0]!r} is not a language code (ISO 639: two or three "
                                  "lower-case letters, no region)")
        elif shipped:
            raise CurateError(f"{where}: the pool needs CODE<TAB>NAME<TAB>WEIGHT")
        else:
            code = lookup(cols[0], where)
            name = shipped_pool().name(code)
        if code in codes:
            raise CurateError(f"{where}: {code!r} is listed twice")
        codes.append(code)
        weights.append(weight)
        names.append(name)
    if not codes:
        raise CurateError(f"{path}: no languages (one CODE<TAB>WEIGHT line per language)")
    if not math.isfinite(sum(weights)):  # each weight finite, their sum too large to draw from
        raise CurateError(f"{path}: the weights add up to more than a number can hold; scale them down "
                          "(only their ratios matter)")
    return Pool(tuple(codes), tuple(weights), tuple(names))


def fingerprint_value(value: str | None) -> Any:
    """What a run's fingerprint keeps of ``--languages``: the pool it resolves to (a weights
    file edited between runs is another run), or None."""
    pool = parse_languages(value)
    return None if pool is None else pool.key()


def item_languages(mode: str | None, pool: Pool | None, seed: int) -> tuple[dict[str, Any], str | None, str | None]:
    """For an item of a spec with ``languages: mode``: the template variables the drawn
    language(s) set, and the record's (language, positive_language). Nothing without a pool or
    for a spec that does not take part."""
    if pool is None or mode is None:
        return {}, None, None
    if mode == "pair":
        source, target = pool.pair(seed)
        pair = {"source": pool.name(source), "target": pool.name(target),
                "source_code": source, "target_code": target}
        return {"language_pair": pair, "language_code": source}, source, target
    code = pool.draw(seed)
    return {"language": pool.name(code), "language_code": code}, code, None
