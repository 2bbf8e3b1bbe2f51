"""A stage of one's own: a seeded sample of a records file, run like a shipped stage.

Registered in ``curate.core.stage.STAGES``, it gets a command (``curate sample``) whose options
are the fields of ``SampleOptions``, a run folder opened by curate's runner (lock, ``run.json``,
resume: the same command again is "done earlier"), and a row in ``curate report``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from curate.core.jsonl import atomic_write_jsonl
from curate.core.records import read_records
from curate.core.stage import STAGES, FunnelRow, Stage


@dataclass
class SampleOptions:
    inp: str = field(metadata={"flag": "--in", "help": "Records file (JSONL) to sample."})  # no default: required
    out: str = field(metadata={"help": "Run folder; the sample goes to OUT/sampled.jsonl."})
    n: int = field(default=100, metadata={"min": 1, "help": "How many records to keep."})
    seed: int = field(default=0, metadata={"help": "Which sample: the same seed, the same records."})


def sample(opts: SampleOptions, run) -> dict:
    """Keep a seeded sample of a records file."""
    records = read_records(opts.inp)
    kept = random.Random(opts.seed).sample(records, min(opts.n, len(records)))
    atomic_write_jsonl(run.path("sampled.jsonl"), [r.to_dict() for r in kept])
    return {"records_in": len(records), "records_kept": len(kept)}


def present(facts: dict) -> FunnelRow:
    return FunnelRow(lines=[("sample", f"{facts['records_kept']} of {facts['records_in']} records kept")],
                     cells=[("in", "records_in"), ("kept", "records_kept")])


STAGES.register("sample", Stage("sample", SampleOptions, sample, reads=("inp",), writes={"records": "sampled.jsonl"},
                                funnel=lambda report, folder: report, present=present))
