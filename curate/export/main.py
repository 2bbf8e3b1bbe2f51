"""``curate export``: records in, one training-ordered row list out, written in every format asked.

One straight path, a step each (``_export``): load (first copy of a record id wins) ->
decontaminate against evaluation sets -> levels of every negative -> dev split -> curriculum
(phases, then batches, then each row's negatives: ``curriculum.order``) -> rows -> card ->
format writers. Every drop is a line of the run's ``rejected.jsonl``. Everything goes through
the run folder (``curate.core.runner``): the files are staged and swapped in together, so a
crashed run leaves the previous export (or nothing), never half of one, and a file this run
read is never deleted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.export.batching import LAYOUTS, TASK_ORDERS, BatchOptions
from curate.export.build import build_row
from curate.export.curriculum import AGREEMENT_TOP, Curriculum, order, parse_curriculum
from curate.export.decontaminate import decontaminate
from curate.export.inputs import load_inputs
from curate.export.instructions import Instruction, resolve
from curate.export.levels import GAP_BINS, assign_levels
from curate.export.rows import ExportRow
from curate.export.splits import split_dev
from curate.core.jsonl import atomic_write_json
from curate.core.runner import open_run

REPORT = "export_report.json"
INDEX = "README.md"  # above the formats' folders when there are several
# Formats whose trainer reads every JSON file of the folder it is given (FlagEmbedding): their
# files go in a folder of their own even alone, never beside export_report.json and run.json.
FOLDER_READ = ("flagembedding",)


def nested(formats) -> bool:
    """Each format in a subfolder named after it (several formats, or one read as a folder)."""
    formats = list(formats)
    return len(formats) > 1 or any(f in FOLDER_READ for f in formats)


@dataclass
class ExportOptions:
    inputs: tuple[str, ...]
    out: str
    formats: tuple[str, ...] = ("sentence-transformers",)
    curriculum: str = "none"
    # "auto": every negative where the teacher agrees with the labels beyond noise, else the hardest one
    # (curriculum.auto_per_row; measured on SciFact and NFCorpus, README "Benchmarks"); N: the hardest N
    # (one of the phase's level under a level curriculum); None: every negative with none/ordered.
    negatives_per_row: int | str | None = "auto"
    gap_levels: str = "export"  # mined negatives' levels: gap quartiles over the export, or ranks per record
    batch_size: int = 32
    batch_layout: str = "homogeneous"
    task_order: str = "random"
    mixed_tail: int = 0
    instruction: str = "auto"  # e5 for several tasks, none for one (instructions.py)
    dev_fraction: float = 0.05
    decontaminate: tuple[str, ...] = ()
    decontaminate_threshold: float = 0.8
    decontaminate_ngram: int = 1
    seed: int = 0
    license: str | None = None  # the card's licence id, where the sources do not give one
    language: tuple[str, ...] = ("en",)  # the card's languages (ISO 639)


def _writers() -> dict[str, Callable]:
    try:
        from curate.export.formats import WRITERS
    except ImportError as e:
        raise CurateError(f"export formats are not available in this installation ({e})") from None
    return WRITERS


def _check(opts: ExportOptions, writers: dict[str, Callable]) -> tuple[Curriculum, list[str], Instruction | None]:
    """Every option checked before any input is read, each failure one line. Returns the
    curriculum, the formats and the instruction (None for ``auto``: the records decide it)."""
    if not opts.inputs:
        raise CurateError("give at least one --in FILE")
    for p in opts.inputs:
        if not Path(p).is_file():
            raise CurateError(f"{p}: no such file")
    for d in opts.decontaminate:
        folder = d if Path(d).is_dir() or ":" not in d else d.rpartition(":")[0]
        if not (Path(folder) / "corpus.jsonl").is_file():
            raise CurateError(f"{folder}: not a BEIR folder (no corpus.jsonl) for --decontaminate")
    names = list(dict.fromkeys(opts.formats or ("sentence-transformers",)))
    if "all" in names:
        names = list(writers)
    unknown = [n for n in names if n not in writers]
    if unknown:
        raise CurateError(f"unknown --format {', '.join(unknown)} (choose from {', '.join(writers)}, all)")
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


def run_export(opts: ExportOptions) -> dict[str, Any]:
    started = time.perf_counter()
    writers = _writers()
    curriculum, formats, instruction = _check(opts, writers)
    out = Path(opts.out)
    if out.exists() and not out.is_dir():
        raise CurateError(f"{out}: exists and is not a folder; choose another --out")
    inputs = [*opts.inputs, *(opts.decontaminate or ())]
    writes = [REPORT, *((INDEX,) if len(formats) > 1 else ()), *(formats if nested(formats) else ())]
    with open_run("export", out, {k: v for k, v in asdict(opts).items() if k != "out"}, inputs,
                  writes=writes) as run:
        _check_out(out)  # after the run folder finished any swap a killed export left
        report = _export(opts, run, {n: writers[n] for n in formats}, curriculum, instruction, started)
        run.counts.update({k: v for k, v in report["counts"].items() if k in ("train", "dev")})
    _print_summary(report, out)
    return report


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
    level_stats = assign_levels(items, opts.gap_levels)
    train, dev, crossing, split_info = split_dev(items, opts.dev_fraction, opts.seed)
    for it in crossing:
        run.reject(it.record.id, "dev-query-overlap", source=it.source)
    if not train:
        raise CurateError(f"nothing to export: of {sum(s.records for s in sources)} records, {len(dropped)} matched "
                          f"--decontaminate sets and {len(dev)} went to dev; no training records are left")
    batches = BatchOptions(opts.batch_size, opts.batch_layout, opts.task_order, opts.mixed_tail)
    ordering = order(train, dev, curriculum, opts.negatives_per_row, batches, opts.seed, items)
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
    from curate.export.formats.hub import hub_metadata

    hub, unlicensed = hub_metadata([s.dataset for s in sources], len(rows), opts.license, list(opts.language))
    card = build_card(rows=rows, sources=sources, decontamination=decon, dropped=run.dropped, params=params,
                      levels=level_stats, ordering=ordering,
                      batching={"batch_size": opts.batch_size, "layout": opts.batch_layout,
                                "task_order": opts.task_order, "mixed_tail": opts.mixed_tail},
                      split=split_info, hub={**hub, **({"license_missing_for": unlicensed} if unlicensed else {})},
                      out=Path(opts.out))
    return _write(run.dir, writers, rows, card, started)


def _write(folder: Path, writers: dict[str, Callable], rows: list[ExportRow], card: dict[str, Any],
           started: float) -> dict[str, Any]:
    """Every format (one subfolder each when there are several) and the report."""
    outputs = {}
    for name, writer in writers.items():
        written = writer(rows, folder / name if nested(writers) else folder, card)
        outputs[name] = [str(Path(p).relative_to(folder)) for p in written]
    if len(writers) > 1:  # a card above the formats: which one datasets reads, how to train on each
        from curate.export.formats.card import write_index
        from curate.export.formats.usage import commands, settings

        how = commands(list(writers), settings(rows, card["parameters"].get("batch_size")))
        write_index(folder, card, outputs, how)
    report = {**card, "outputs": outputs, "wall_seconds": round(time.perf_counter() - started, 2)}
    atomic_write_json(folder / REPORT, report)
    return report


def _print_summary(report: dict[str, Any], out: Path) -> None:
    from curate.progress import console

    c = report["counts"]
    phases = ", ".join(f"{k}: {v}" for k, v in c["phase"].items())
    console.print(f"export ({report['curriculum']['arm']}): {c.get('train', 0)} train rows in "
                  f"{c['batches']['train']} batches{f' (phases {phases})' if phases else ''}, "
                  f"{c.get('dev', 0)} dev rows ({report['split']['mode']})")
    auto = report.get("negatives_per_row")
    if auto:
        share = auto[f"positive_in_teacher_top_{AGREEMENT_TOP}"]
        why = (f"{share:.0%} of {auto['records_ranked']} labelled positives in the teacher's top {AGREEMENT_TOP}, "
               f"at least {auto['share_low_95']:.0%} at 95%; every one needs more than {auto['threshold']:.0%}"
               if share is not None else
               f"relabelled: every negative of {auto['records_relabelled']} records judged not relevant"
               if auto.get("records_relabelled") else "no record has a teacher rank")
        console.print(f"  negatives a row: {auto['chose']} (auto: {why})")
    missing = report.get("hub", {}).get("license_missing_for")
    if missing:
        console.print(f"  card licence: unknown for {', '.join(missing)}; give --license ID (e.g. cc-by-4.0)")
    for f in report["filters"]:
        if f.get("records_dropped") and "folder" not in f:
            console.print(f"  dropped {f['records_dropped']}: {f['step']}")
    console.print(f"wrote {', '.join(report['outputs'])} and {REPORT} to {out} in {report['wall_seconds']:.1f}s")
