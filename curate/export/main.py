"""``curate export``: records in, one training-ordered row list out, written in every format asked.

One straight path, a step each (``_export``): load (first copy of a record id wins) ->
decontaminate against evaluation sets -> negatives that copy a positive out (``copies``) ->
levels of every negative -> dev split -> curriculum (phases, then batches, then each row's
negatives: ``curriculum.order``) -> rows -> shortcut audit (``curate.audit``) -> card -> format
writers. Every drop is a line of the run's ``rejected.jsonl``. Everything goes through the run
folder (``curate.core.runner``): the files are staged and swapped in together, so a crashed run
leaves the previous export (or nothing), never half of one, and a file this run read is never
deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.export.batching import LAYOUTS, TASK_ORDERS, BatchOptions
from curate.export.build import build_row
from curate.export.copies import REASON as COPY, drop_positive_copies
from curate.export.curriculum import AGREEMENT_TOP, KEEPS, Curriculum, order, parse_curriculum
from curate.export.decontaminate import decontaminate
from curate.export.inputs import load_inputs
from curate.export.instructions import Instruction, resolve
from curate.export.levels import GAP_BINS, assign_levels
from curate.export.rows import ExportRow
from curate.export.targets import TARGETS, disagreement, lifts
from curate.export.splits import split_dev
from curate.core.stage import REPORT, STAGES, FunnelRow, Stage
from curate.core.runner import Drop

INDEX = "README.md"  # above the formats' folders when there are several
LONG_WRITE = 100_000  # rows from which writing several formats takes long enough for a bar


def nested(formats) -> bool:
    """Each format in a subfolder named after it: several formats, or one whose trainer reads every
    file of the folder it is given (FlagEmbedding: never beside the report and run.json)."""
    from curate.export.formats import FORMATS

    formats = list(formats)
    return len(formats) > 1 or any(f in FORMATS and FORMATS.get(f).own_folder for f in formats)


@dataclass
class ExportOptions:
    inputs: tuple[str, ...] = field(metadata={
        "flag": "--in", "path": "file",
        "help": "Records to export (JSONL from generate, filter, mine or convert); repeatable. "
                "A record id already read from an earlier --in is skipped."})
    out: str = field(metadata={
        "path": "dir", "help": "Export folder (replaced whole when it holds an earlier export)."})
    formats: tuple[str, ...] = field(default=("sentence-transformers",), metadata={
        "flag": "--format", "help_names": {"formats": "curate.export.formats:in_order"},
        "help": "{formats}, or all (several: one subfolder each); repeatable."})
    curriculum: str = field(default="none", metadata={
        "help": "none (the record's hardest negatives on every row, see --negatives-per-row), ordered (the same, "
                "records easy to hard in four phases), mgh (phases of level 4, 3, 2, 1 negatives, one per row), "
                "reverse (1, 2, 3, 4), random (a random level per row) or fixed:N."})
    # "auto": every negative where the teacher agrees with the labels beyond noise, else the hardest one
    # (curriculum.auto_per_row; measured on SciFact and NFCorpus, README "Benchmarks"); N: the hardest N
    # (one of the phase's level under a level curriculum); None: every negative with none/ordered.
    negatives_per_row: int | str | None = field(default="auto", metadata={
        "help": "Negatives each row carries, its record's hardest first (one of its phase's level under a level "
                "curriculum); 'all': every negative of the record (with none and ordered); 'auto': all where the "
                "teacher ranks at least half of the labelled positives in its top 10, else 1 (and 1 for records "
                "no teacher ranked)."})
    # which negatives a row keeps when it keeps fewer than its record has: the mining teacher's
    # choice (measured against the levels' on the three shipped sets: docs, Benchmarks)
    keep: str = field(default="rank", metadata={
        "choices": KEEPS,
        "help": "Which of a record's negatives are its hardest, the ones a row keeps first: rank (the mining "
                "teacher's own first choices, mine_rank) or level (the lowest levels, drawn from the records' "
                "scores: with mine --scores hybrid, the hybrid's favourites). The two differ only on mined "
                "records whose scores are not the mining teacher's; records without ranks go by level."})
    # the label column's positive: lifted above a negative the teacher scores at or above it (targets.py);
    # "teacher" is the ablation arm that measures the lift, so a default run's identity and card leave it out
    targets: str = field(default="labels", metadata={
        "choices": TARGETS, "fingerprint": "if-set", "lineage": "if-set",
        "help": "The targets in the sentence-transformers label column: labels (where the teacher scores a "
                "negative at or above the positive, the positive's target is lifted just above it, so no target "
                "contradicts the label) or teacher (the teacher's scores as they are, to measure what the lift "
                "does)."})
    # mined negatives' levels: gap quartiles over the export, or ranks per record
    gap_levels: str = field(default="export", metadata={
        "choices": GAP_BINS,
        "help": "Levels of mined negatives from the teacher gap: quartiles over the whole export, or the gap's "
                "rank within each record (every record then has all four levels)."})
    batch_size: int = field(default=32, metadata={
        "help": "Rows per training batch; the file order is the training order."})
    batch_layout: str = field(default="homogeneous", metadata={
        "choices": LAYOUTS,
        "help": "One task per batch (SFR, Linq) or tasks mixed in every batch (NV-Embed)."})
    task_order: str = field(default="random", metadata={
        "choices": TASK_ORDERS,
        "help": "fixed: the same task order in every block of batches (Linq's homogeneous task ordering)."})
    mixed_tail: int = field(default=0, metadata={
        "help": "End training with this many mixed-task batches (Linq's mixed task fine-tuning)."})
    instruction: str = field(default="auto", metadata={  # e5 for several tasks, none for one (instructions.py)
        "help": "Query instruction: auto (e5 when the records hold several tasks, none for one), "
                "e5 ('Instruct: {task}\\nQuery: {query}'), nv ('{task}: {query}'), "
                "none, or a Jinja template (or template file) using task and query."})
    dev_fraction: float = field(default=0.05, metadata={
        "help": "Share of records held out as dev, whole tasks at a time (0: no dev split)."})
    decontaminate: tuple[str, ...] = field(default=(), metadata={
        "metavar": "BEIR_DIR[:SPLIT]",
        "help": "Evaluation set: drop records whose query or positive near-duplicates one of its queries or "
                "documents (with :SPLIT, that split's queries and their relevant documents); repeatable."})
    decontaminate_threshold: float = field(default=0.8, metadata={
        "min": 0.0, "max": 1.0, "help": "MinHash Jaccard at or above which a text counts as a copy."})
    decontaminate_ngram: int = field(default=1, metadata={
        "min": 1, "help": "Words per shingle for decontamination (1: word sets, robust for short queries)."})
    seed: int = field(default=0, metadata={"help": "Seed of every shuffle and draw."})
    license: str | None = field(default=None, metadata={  # the card's licence id, where the sources do not give one
        "metavar": "ID",
        "help": "The dataset card's licence (a Hub id such as cc-by-4.0), for data whose sources do not give "
                "one: generated records, your own documents. Without it such an export's card says 'unknown' "
                "and the export names the sources that lack one."})
    language: tuple[str, ...] = field(default=("en",), metadata={  # the card's languages (ISO 639)
        "metavar": "CODE", "help": "The dataset card's language (ISO 639 code) for records that do not name "
                                   "theirs (those of generate --languages do); repeatable."})
    # the shortcut audit (curate.audit): probes that tell LLM text from corpus text, positives from negatives
    audit: bool = field(default=True, metadata={
        "help": "Audit the export for shortcuts: how well a probe tells LLM-written negatives from corpus text, "
                "positives from negatives and one level from the others without the query (report, card, and a "
                "warning when an AUC reaches 0.8)."})
    audit_embeddings: bool = field(default=True, metadata={
        "help": "Probe the bundled teacher's embeddings too, through the embedding cache (texts filter or mine "
                "encoded cost nothing); --no-audit-embeddings: character n-grams only."})
    audit_sample: int = field(default=500, metadata={
        "min": 10, "help": "Texts each audit comparison draws at most from each side (seeded)."})


def _writers() -> dict[str, Callable]:
    """Every format's writer, in the formats' order (``--format all`` writes them so)."""
    try:
        from curate.export.formats import writers

        return writers()
    except ImportError as e:
        raise CurateError(f"export formats are not available in this installation ({e})") from None


def _check(opts: ExportOptions, writers: dict[str, Callable]) -> tuple[Curriculum, list[str], Instruction | None]:
    """Every option checked before any input is read, each failure one line. Returns the
    curriculum, the formats and the instruction (None for ``auto``: the records decide it)."""
    _check_inputs(opts)
    _check_decontaminate(opts)
    return check_options(opts, writers)


def _check_decontaminate(opts: ExportOptions) -> None:
    for d in opts.decontaminate:
        folder = d if Path(d).is_dir() or ":" not in d else d.rpartition(":")[0]
        if not (Path(folder) / "corpus.jsonl").is_file():
            raise CurateError(f"{folder}: not a BEIR folder (no corpus.jsonl) for --decontaminate")


def _check_inputs(opts: ExportOptions) -> None:
    if not opts.inputs:
        raise CurateError("give at least one --in FILE")
    for p in opts.inputs:
        if not Path(p).is_file():
            raise CurateError(f"{p}: no such file")


def check_options(opts: ExportOptions, writers: dict[str, Callable] | None = None
                  ) -> tuple[Curriculum, list[str], Instruction | None]:
    """The options that do not name files, checked as ``_check`` checks them: what a grid's
    ``export:`` arm is held to when the grid is read, before its records exist."""
    writers = _writers() if writers is None else writers
    names = list(dict.fromkeys(opts.formats or ("sentence-transformers",)))
    if "all" in names:
        names = list(writers)
    unknown = [n for n in names if n not in writers]
    if unknown:
        from curate.export.formats import FORMATS

        raise CurateError(f"unknown --format {', '.join(unknown)}{FORMATS.hint(unknown[0])} "
                          f"(choose from {', '.join(writers)}, all)")
    if opts.batch_size < 1:
        raise CurateError("--batch-size must be at least 1")
    if opts.batch_layout not in LAYOUTS:
        raise CurateError(f"--batch-layout {opts.batch_layout!r}: choose {' or '.join(LAYOUTS)}")
    if opts.task_order not in TASK_ORDERS:
        raise CurateError(f"--task-order {opts.task_order!r}: choose {' or '.join(TASK_ORDERS)}")
    if not 0 <= opts.dev_fraction < 1:
        raise CurateError(f"--dev-fraction must be in [0, 1), got {opts.dev_fraction}")
    per_row = opts.negatives_per_row
    if per_row not in (None, "auto", "all") and (not isinstance(per_row, int) or isinstance(per_row, bool)
                                                 or per_row < 1):
        raise CurateError(f"--negatives-per-row {per_row!r}: give a count of at least 1, 'all' or 'auto'")
    if opts.gap_levels not in GAP_BINS:
        raise CurateError(f"--gap-levels {opts.gap_levels!r}: choose {' or '.join(GAP_BINS)}")
    if opts.keep not in KEEPS:
        raise CurateError(f"--keep {opts.keep!r}: choose {' or '.join(KEEPS)}")
    if opts.mixed_tail < 0:
        raise CurateError("--mixed-tail must be 0 or more")
    instruction = None if opts.instruction == "auto" else Instruction(opts.instruction)  # a bad template fails here
    from curate.export.formats.hub import check_language, check_license

    check_license(opts.license)
    for lang in opts.language:
        check_language(lang)
    return parse_curriculum(opts.curriculum), names, instruction


def _check_out(out: Path) -> None:
    """An earlier export (or an empty folder) may be written over; anything else is the user's."""
    if not (out / REPORT).is_file() and any(not p.name.startswith(".curate") for p in out.iterdir()):
        raise CurateError(f"{out}: exists and is not an earlier export; choose another --out")


def check(opts: ExportOptions) -> None:
    """Every option, before anything starts (in a pipeline, before its inputs exist: they are
    checked when the export runs)."""
    _check_decontaminate(opts)
    check_options(opts)
    out = Path(opts.out)
    if out.exists() and not out.is_dir():
        raise CurateError(f"{out}: exists and is not a folder; choose another --out")


def _outputs(opts: ExportOptions) -> list[str]:
    """What an export writes besides its report, by the formats asked for."""
    formats = check_options(opts)[1]
    return [*((INDEX,) if len(formats) > 1 else ()), *(formats if nested(formats) else ())]


def export_stage(opts: ExportOptions, run) -> dict[str, Any]:
    """Export every format into ``run``'s folder, return the report (printing nothing)."""
    started = time.perf_counter()
    writers = _writers()
    curriculum, formats, instruction = _check(opts, writers)
    _check_out(Path(opts.out))  # after the run folder finished any swap a killed export left
    report = _export(opts, run, {n: writers[n] for n in formats}, curriculum, instruction, started)
    run.counts.update({k: v for k, v in report["counts"].items() if k in ("train", "dev")})
    return report


def run_export(opts: ExportOptions) -> dict[str, Any]:
    """Export through the stage runner (as ``curate export`` does, printing nothing); the report."""
    from curate.core.stage import run_stage

    return run_stage(STAGE, opts, quiet=True)[0]


def _export(opts: ExportOptions, run, writers: dict[str, Callable], curriculum: Curriculum,
            instruction: Instruction | None, started: float) -> dict[str, Any]:
    items, sources = load_inputs(list(opts.inputs))
    for s in sources:
        for rec_id in s.skipped:
            run.reject(rec_id, "duplicate-id", source=s.path)
    items, dropped, decon = decontaminate(items, opts.decontaminate, opts.decontaminate_threshold,
                                          opts.decontaminate_ngram)
    for d in dropped:  # with the evaluation texts each matched, in the run's one drop log
        run.reject(d["id"], "decontaminate", source=d["source"], matches=d["matches"])
    for it, neg in drop_positive_copies(items):  # never a row's negative: counted on the card
        run.drop(Drop(it.record.id, run.stage, COPY, level=neg.level, text=neg.text, detail={"source": it.source}))
    level_stats = assign_levels(items, opts.gap_levels)
    train, dev, crossing, split_info = split_dev(items, opts.dev_fraction, opts.seed)
    for it in crossing:
        run.reject(it.record.id, "dev-query-overlap", source=it.source)
    if not train:
        raise CurateError(f"nothing to export: of {sum(s.records for s in sources)} records, {len(dropped)} matched "
                          f"--decontaminate sets and {len(dev)} went to dev; no training records are left")
    batches = BatchOptions(opts.batch_size, opts.batch_layout, opts.task_order, opts.mixed_tail)
    ordering = order(train, dev, curriculum, opts.negatives_per_row, batches, opts.seed, items, opts.keep)
    for it in ordering.left_over:
        run.reject(it.record.id, "batch-repeat", split=it.split, source=it.source)
    instruction = instruction or Instruction(resolve("auto", {it.record.task for it in items}))
    from curate.export.formats.card import build_card, portable_path

    named = {s.path: portable_path(s.path, Path(opts.out)) for s in sources}  # no local path in the rows
    rows = [build_row(it, instruction, named[it.source]) for it in ordering.rows]

    params = dict(run.params)  # the options as given; the card adds what they resolved to
    params.update(formats=list(writers), curriculum=ordering.card["arm"],
                  negatives_per_row="all" if ordering.per_row is None else ordering.per_row,
                  instruction=instruction.spec)
    if opts.instruction == "auto":
        params["instruction_asked"] = "auto"
    if ordering.auto is not None:
        params["negatives_per_row_asked"] = "auto"
    from curate.export.formats.card import card_languages, language_counts
    from curate.export.formats.hub import hub_metadata

    placed = [it.record for it in ordering.rows]
    languages = language_counts(placed)  # generate --languages records say theirs; others take --language
    hub, unlicensed = hub_metadata([s.dataset for s in sources], len(rows), opts.license,
                                   card_languages(languages, list(opts.language),
                                                  any(r.language is None for r in placed)))
    audit, audit_seconds = _audit(opts, items, rows)
    card = build_card(rows=rows, sources=sources, decontamination=decon, dropped=run.dropped, params=params,
                      levels=level_stats, ordering=ordering,
                      batching={"batch_size": opts.batch_size, "layout": opts.batch_layout,
                                "task_order": opts.task_order, "mixed_tail": opts.mixed_tail},
                      split=split_info, hub={**hub, **({"license_missing_for": unlicensed} if unlicensed else {})},
                      out=Path(opts.out), audit=audit, languages=languages)
    # rows whose teacher ranks a negative at or above the positive
    card.update(disagreement(rows, lifted=lifts(params)))
    report = _write(run.dir, writers, rows, card, started)
    if audit is not None:  # the time with the report's timings: the card stays the same for the same data
        report["timings"] = {"audit": audit_seconds}
    return report


def _audit(opts: ExportOptions, items, rows: list[ExportRow]) -> tuple[dict[str, Any] | None, float]:
    """The shortcut audit of the records the rows came from (``curate.audit``), and its seconds."""
    if not opts.audit:
        return None, 0.0
    from curate.audit import AuditOptions, run_audit

    began = time.perf_counter()
    written = {r.record_id for r in rows}
    audit = run_audit([it.record for it in items if it.record.id in written],
                      AuditOptions(embeddings=opts.audit_embeddings, sample=opts.audit_sample, seed=opts.seed))
    return audit, round(time.perf_counter() - began, 2)


def _write(folder: Path, writers: dict[str, Callable], rows: list[ExportRow], card: dict[str, Any],
           started: float) -> dict[str, Any]:
    """Every format (one subfolder each when there are several) and the report."""
    from curate.core.progress import track

    outputs = {}
    # a bar for several formats of many rows: it moves a format at a time (each writer takes every row at once)
    long = len(writers) > 1 and len(rows) >= LONG_WRITE
    with track(len(rows) * len(writers) if long else 0, f"writing {len(writers)} formats") as advance:
        for name, writer in writers.items():
            written = writer(rows, folder / name if nested(writers) else folder, card)
            outputs[name] = [str(Path(p).relative_to(folder)) for p in written]
            advance(len(rows))
    if len(writers) > 1:  # a card above the formats: which one datasets reads, how to train on each
        from curate.export.formats.card import write_index
        from curate.export.formats.usage import commands, settings

        how = commands(list(writers), settings(rows, card["parameters"].get("batch_size")))
        write_index(folder, card, outputs, how)
    return {**card, "outputs": outputs, "wall_seconds": round(time.perf_counter() - started, 2)}


def summary(report: dict[str, Any], out: Path) -> list[str]:
    """Rows, batches and phases written, what ``auto`` chose and why, and where."""
    lines = []
    c = report["counts"]
    phases = ", ".join(f"{k}: {v}" for k, v in c["phase"].items())
    arm = report["curriculum"]["arm"]
    batches = c["batches"]["train"]
    lines.append(f"export: {c.get('train', 0)} train rows in {batches} batch{'' if batches == 1 else 'es'} "
                 f"({'no curriculum' if arm in (None, 'none') else f'curriculum {arm}'}"
                 f"{f'; phases {phases}' if phases else ''}), "
                 f"{c.get('dev', 0)} dev row{'' if c.get('dev', 0) == 1 else 's'} (split {report['split']['mode'].replace('by-', 'by ')})")
    auto = report.get("negatives_per_row")
    if auto:
        share = auto[f"positive_in_teacher_top_{AGREEMENT_TOP}"]
        why = (f"the teacher ranks {share:.0%} of {auto['records_ranked']} positives in its top {AGREEMENT_TOP}, "
               f"surely at least {auto['share_low_95']:.0%} (95% confidence); keeping every negative needs more "
               f"than {auto['threshold']:.0%}"
               if share is not None else
               f"relabelled: every negative of {auto['records_relabelled']} records judged not relevant"
               if auto.get("records_relabelled") else "no record has a teacher rank")
        lines.append(f"  negatives a row: {auto['chose']}, chosen by auto: {why}")
    disagree = report.get("label_targets") or {}
    if disagree.get("false_negative_candidates"):
        lines.append(f"  teacher scores a negative at or above the positive on {disagree['false_negative_candidates']} "
                     f"of {disagree['rows_scored']} rows ({', '.join(disagree['examples'])}"
                     f"{', ...' if disagree['false_negative_candidates'] > len(disagree['examples']) else ''}): false-negative "
                     "candidates; " + ("the sentence-transformers label puts the positive first" if disagree.get("lifted", True)
                                       else "the label keeps the teacher's scores (--targets teacher)"))
    if report.get("audit"):
        from curate.audit import summary_lines

        lines += summary_lines(report["audit"])
    missing = report.get("hub", {}).get("license_missing_for")
    if missing:
        lines.append(f"  card licence: unknown for {', '.join(missing)}; give --license ID (e.g. cc-by-4.0)")
    for f in report["filters"]:
        if f.get("records_dropped") and "folder" not in f:
            lines.append(f"  dropped {f['records_dropped']}: {f['step']}")
        elif f.get("negatives_dropped"):
            lines.append(f"  dropped {f['negatives_dropped']} negatives: {f['step']}")
    lines.append(f"wrote {', '.join(report['outputs'])} and {REPORT} to {out} in {report['wall_seconds']:.1f}s")
    return lines


def written_files(folder: str | Path, fmt: str) -> list[Path]:
    """The files a finished export in ``folder`` wrote for format ``fmt``, as its report lists
    them (none: no finished export there), so no other module reads the report's layout."""
    from curate.core.stage import report_of

    outputs = (report_of(folder) or {}).get("outputs") or {}
    return [Path(folder) / f for f in outputs.get(fmt) or []]


def funnel(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    c = report["counts"]
    split = {"train": c.get("train", 0), "dev": c.get("dev", 0)}
    return {"folder": str(folder), "rows": split["train"] + split["dev"],
            "formats": {name: {**split, "files": files} for name, files in report["outputs"].items()}}


def present(e: dict[str, Any]) -> FunnelRow:
    n = lambda count, noun: f"{count} {noun}{'' if count == 1 else 's'}"  # noqa: E731
    cells = [("rows", "rows")]
    for name in e.get("formats") or {}:
        cells += [(f"{name} train", f"formats.{name}.train"), (f"{name} dev", f"formats.{name}.dev")]
    return FunnelRow(lines=[("export", f"{name}: {n(rows['train'], 'train row')}, {n(rows['dev'], 'dev row')}")
                            for name, rows in e["formats"].items()], cells=cells)


def details(report: dict[str, Any]) -> list[tuple[str, str]]:
    """What went out, as the report page's table shows it."""
    c = report.get("counts") or {}
    hub = report.get("hub") or {}
    params = report.get("parameters") or {}
    join = lambda items: ", ".join(f"{k} {v}" for k, v in items)  # noqa: E731
    licence = str(hub.get("license"))
    if hub.get("license_missing_for"):
        licence += f" (unknown for {', '.join(hub['license_missing_for'])}: give --license)"
    return [("rows", join((k, c[k]) for k in ("train", "dev") if isinstance(c.get(k), int))),
            ("negatives a row", str((report.get("negatives_per_row") or {}).get("chose",
                                                                                 params.get("negatives_per_row")))),
            ("negatives by level", ", ".join(f"level {k}: {v}" for k, v in (c.get("level") or {}).items())),
            ("families", join((c.get("task_type") or {}).items())),
            ("instruction", str(params.get("instruction"))), ("curriculum", str(params.get("curriculum"))),
            ("formats", ", ".join((report.get("outputs") or {}).keys())),
            ("languages", ", ".join(hub.get("language") or [])), ("licence", licence)]


STAGE = Stage("export", ExportOptions, export_stage, check=check, also_writes=_outputs,
              reads=("inputs", "decontaminate"), writes={},
              summary=summary, funnel=funnel, present=present, details=details, needs=("query", "positive"))
STAGES.register(STAGE.name, STAGE)
