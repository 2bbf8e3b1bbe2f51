"""The dataset card (README.md) of a Parquet export: YAML the loader reads, then text people read.

The YAML front matter names each split's files (``configs``) and the column types
(``dataset_info``), so ``datasets.load_dataset(folder)`` reads exactly these files in this
order. The text renders every entry of the export's card dict (counts, sources, filters,
parameters, ...) whatever its nesting, so a new entry needs no change here.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from curate.export.copies import REASON as COPY
from curate.export.formats.common import atomic_path
from curate.export.formats.parquet import yaml_features


DROP_NOTES = {"duplicate-id": "a record id already read from an earlier --in",
              "batch-repeat": "left over at the end of a split and would repeat a query or positive in its last batch",
              COPY: "a negative whose text (whitespace normalised) is one of its record's positives; the record "
                    "stays without it"}
NEGATIVE_DROPS = (COPY,)  # drops of one negative, not of its record


def build_card(*, rows: list, sources: list, decontamination: list[dict[str, Any]], dropped: Counter,
               params: dict[str, Any], levels: dict[str, Any], ordering, batching: dict[str, Any],
               split: dict[str, Any], hub: dict[str, Any], out: Path,
               audit: dict[str, Any] | None = None, languages: dict[str, Any] | None = None) -> dict[str, Any]:
    """The export's card: what went in, what was dropped and why, and every setting as resolved.

    The drop counts are read from the run's drop log (``rejected.jsonl``, counted by reason),
    so the card and the log cannot disagree; every path is made portable. ``audit``: the shortcut
    audit's section (``curate.audit``), when the export ran it; ``languages``: the rows' languages
    (``language_counts``), when any row has one."""
    details = {**{k: {"note": v} for k, v in DROP_NOTES.items()},
               "decontaminate": {"threshold": params["decontaminate_threshold"], "ngram": params["decontaminate_ngram"]}}
    filters = [*decontamination, *({"step": reason,
                                    "negatives_dropped" if reason in NEGATIVE_DROPS else "records_dropped": n,
                                    **details.get(reason, {})} for reason, n in dropped.items())]
    card: dict[str, Any] = {
        "title": f"curate export: {len(rows)} rows from "
                 f"{', '.join(str(Path(Path(s.path).parent.name, Path(s.path).name)) for s in sources)}",
        "counts": {**_counts(rows), **({"language": languages} if languages else {})},
        "sources": [s.as_dict() for s in sources],
        "filters": filters,
        "parameters": params,
        "levels": levels,
        **({"negatives_per_row": ordering.auto} if ordering.auto is not None else {}),
        "curriculum": ordering.card,
        "batching": {"train": ordering.batch_kinds["train"], "dev": ordering.batch_kinds["dev"], **batching},
        "split": split,
        **({"audit": audit} if audit is not None else {}),  # curate.audit: the shortcuts a probe finds
        "hub": hub,
    }
    return portable(card, out)


def _counts(rows: list) -> dict[str, Any]:
    def tally(key) -> dict[str, int]:
        return dict(sorted(Counter(str(key(r)) for r in rows).items()))

    out: dict[str, Any] = dict(Counter(r.split for r in rows))
    out["task_type"] = tally(lambda r: r.task_type)
    out["phase"] = dict(sorted(Counter(str(r.phase) for r in rows if r.phase is not None).items()))
    out["source"] = tally(lambda r: r.meta["export"]["input"])
    out["level"] = dict(sorted(Counter(str(lv) for r in rows if r.split == "train" for lv in r.levels).items()))
    out["batches"] = {s: len({r.batch for r in rows if r.split == s}) for s in ("train", "dev")}
    return out


def language_counts(records: list) -> dict[str, dict[str, int]]:
    """How many rows ask their query in each language, and how many have their positive in it
    (a record's ``positive_language``, else its ``language``); empty when no record says (then
    the card is what it always was)."""
    query: Counter = Counter()
    positive: Counter = Counter()
    for rec in records:
        if rec.language:
            query[rec.language] += 1
        if rec.positive_language or rec.language:
            positive[rec.positive_language or rec.language] += 1
    if not query and not positive:
        return {}
    return {"query": dict(sorted(query.items())), "positive": dict(sorted(positive.items()))}


def card_languages(counts: dict[str, dict[str, int]], declared: list[str], unlabelled: bool) -> list[str]:
    """The card's ``language`` list: every language its rows' queries and positives are in, the
    most frequent first, and ``declared`` (``--language``) for rows that do not say; only
    ``declared`` when no row says (records from before ``generate --languages``, or mined ones)."""
    if not counts:
        return list(declared)
    total = Counter(counts["query"]) + Counter(counts["positive"])
    codes = [code for code, _ in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))]
    return codes + [c for c in declared if c not in codes] if unlabelled else codes


PATH_KEYS = ("path", "inputs", "qrels", "corpus", "folder")  # card entries whose strings are file paths
HIDDEN = ("title", "hub")  # card entries the front matter shows, not a section


def portable(card: Any, base: Path, key: str = "") -> Any:
    """The card with every file path relative to ``base`` (the export folder): a card is read
    where the export goes (the Hub, another machine), where this machine's paths mean nothing
    and may say more than the user meant to publish."""
    if isinstance(card, dict):
        return {k: portable(v, base, k) for k, v in card.items()}
    if isinstance(card, (list, tuple)):  # options such as ``inputs`` come as tuples
        return [portable(v, base, key) for v in card]
    if isinstance(card, str) and (key in PATH_KEYS or os.path.isabs(card)):
        return portable_path(card, base)
    return card


def portable_path(path: str, base: Path) -> str:
    """Relative to the export when it sits beside or inside it (``../mined/mined.jsonl``), else
    just its name: a path climbing further out would spell this machine's folders again."""
    if "://" in path:
        return path
    rel = Path(os.path.relpath(os.path.abspath(path), os.path.abspath(base))).as_posix()
    return rel if rel.split("/").count("..") <= 1 else Path(path).name


def write_card(out_dir: Path, card: dict, files: dict[str, list[str]], tables: dict[str, pa.Table],
               columns: dict[str, str], usage: str, notes: list[str] = ()) -> Path:
    """Write ``out_dir/README.md``; ``columns`` explains each column, ``usage`` is a how-to section."""
    schema = next(iter(tables.values())).schema
    front = _front(card, configs=[_config("default", files)],
                   dataset_info={"features": yaml_features(schema),
                                 "splits": [{"name": s, "num_bytes": t.nbytes, "num_examples": t.num_rows}
                                            for s, t in tables.items()]})
    parts = ["Made by `curate export`. Rows are stored in training order: the order in the files is the "
             "order a trainer should read them, batch by batch.", ""]
    parts += _section("Rows per split", _kv_table({s: t.num_rows for s, t in tables.items()}))
    for key, value in card.items():  # counts, sources, filters, parameters, and whatever else it holds
        if key not in HIDDEN and not _empty(value):
            parts += _section(key.replace("_", " ").capitalize(), _render(value))
    parts += _section("Columns", _kv_table(columns, ("column", "meaning")))
    if notes:
        parts += _section("Notes", "\n".join(f"- {n}" for n in notes))
    parts += _section("Training in file order", usage.strip())
    return _write_readme(out_dir, card, front, parts)


def _front(card: dict, **extra: Any) -> dict:
    """The YAML front matter every card starts with: name, Hub metadata, tags, then ``extra``."""
    return {"pretty_name": card.get("title") or "curate export", **(card.get("hub") or {}),
            "tags": ["curate", "text-embeddings"], **extra}


def _config(name: str, files: dict[str, list[str]], default: bool = False) -> dict:
    """One ``datasets`` config: each split's files, listed one by one (a glob would read stale ones)."""
    return {"config_name": name, **({"default": True} if default else {}),
            "data_files": [{"split": s, "path": paths} for s, paths in files.items()]}


def _write_readme(out_dir: Path, card: dict, front: dict, parts: list[str]) -> Path:
    """``out_dir/README.md``: the front matter, the card's title, then ``parts``."""
    head = ["---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=1000).rstrip(), "---", "",
            f"# {card.get('title') or 'curate export'}", ""]
    path = out_dir / "README.md"
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(head + parts).rstrip() + "\n", encoding="utf-8")
    return path


def _section(title: str, body: str) -> list[str]:
    return [f"## {title}", "", body, ""]


def _render(value: Any) -> str:
    """Markdown for a card entry: a dict's plain values form one table and each nested value
    a titled part; a list of dicts is a table with a row each; anything else compact JSON."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if not _empty(v)}
        plain = {k: v for k, v in value.items() if _plain(v)}
        parts = [_kv_table(plain)] if plain else []
        parts += [f"**{k}**\n\n{_render(v)}" for k, v in value.items() if k not in plain]
        return "\n\n".join(parts)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        keys = list(dict.fromkeys(k for v in value for k in v))
        lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        lines += ["| " + " | ".join(_cell(v.get(k, "")) for k in keys) + " |" for v in value]
        return "\n".join(lines)
    if isinstance(value, list):
        return "\n".join(f"- {_cell(v)}" for v in value)
    return _cell(value)


def _empty(v: Any) -> bool:
    """Nothing to show: no value, or a mapping or list of nothing (a card has no empty section)."""
    if isinstance(v, dict):
        return all(_empty(x) for x in v.values())
    if isinstance(v, list):
        return not v
    return v is None or v == ""


def _plain(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool)) or (
        isinstance(v, list) and all(isinstance(x, (str, int, float, bool)) for x in v))


def _kv_table(d: dict, head: tuple[str, str] = ("", "value")) -> str:
    lines = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    lines += [f"| {_cell(k)} | {_cell(v)} |" for k, v in d.items()]
    return "\n".join(lines)


def _cell(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, sort_keys=True, default=str)
    return text.replace("|", "\\|").replace("\n", " ")


PARQUET_FORMATS = ("sentence-transformers", "hf")  # the default config first


def write_index(out_dir: Path, card: dict, outputs: dict[str, list[str]], how_to_train: str) -> Path:
    """``out_dir/README.md`` of an export with several formats, one sub-folder each: the Hub
    metadata, one named ``datasets`` config per Parquet format (so ``load_dataset(folder)`` reads
    a stated default instead of whichever files it finds first, and ``load_dataset(folder, "hf")``
    the other), and how to train on every format."""
    configs = []
    for fmt in PARQUET_FORMATS:
        shards: dict[str, list[str]] = {}
        for f in outputs.get(fmt, []):
            name = Path(f).name
            if name.endswith(".parquet"):
                shards.setdefault(name.split("-")[0], []).append(f)
        if shards:
            configs.append(_config(fmt, shards, default=not configs))
    front = _front(card, **({"configs": configs} if configs else {}))
    parts = ["Made by `curate export`: the same rows in one sub-folder per trainer's format. Rows are stored "
             "in training order. `report.json` has the counts, sources, filters and parameters.", ""]
    parts += _section("Formats", _kv_table({fmt: f"{fmt}/ ({len(files)} files)" for fmt, files in outputs.items()},
                                           ("format", "folder")))
    if configs:
        parts += _section("Loading", f"`datasets.load_dataset(FOLDER)` reads `{configs[0]['config_name']}`; "
                                     + ", ".join(f"`load_dataset(FOLDER, \"{c['config_name']}\")`" for c in configs)
                                     + " name each Parquet format.")
    parts += _section("Training", how_to_train)
    return _write_readme(out_dir, card, front, parts)


def write_format_card(out_dir: Path, card: dict, fmt: str, files: list[Path], how_to_train: str,
                      configs: bool = True) -> Path:
    """``out_dir/README.md`` of a JSON format: the Hub metadata, a ``datasets`` config naming each
    split's files (without one ``datasets`` renames ``dev`` to "validation" from the file name),
    and how to train on it. ``configs=False`` where the files of a split differ in columns."""
    by_split: dict[str, list[str]] = {}
    for f in files:
        rel = Path(f).relative_to(out_dir)
        split = rel.parts[0] if len(rel.parts) > 1 else rel.name.split(".")[0]
        by_split.setdefault(split if split in ("train", "dev") else "train", []).append(rel.as_posix())
    front = _front(card, **({"configs": [_config("default", by_split)]} if configs else {}))
    parts = [f"The `{fmt}` format of a curate export: "
             + ", ".join(f"{split} in {', '.join(f'`{p}`' for p in paths)}" for split, paths in by_split.items())
             + ".", ""]
    parts += _section("Training", how_to_train)
    return _write_readme(out_dir, card, front, parts)
