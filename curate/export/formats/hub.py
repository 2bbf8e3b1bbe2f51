"""The Hub metadata of an export's dataset card: what the Hugging Face Hub indexes a dataset by.

The Hub checks these fields against its own lists when a card is pushed, and nothing installed
checks them offline (``huggingface_hub``'s ``validate`` asks the Hub), so the allowed values
the export uses are kept here: a card the export writes is right before it leaves the machine.
"""

from __future__ import annotations

import re

from curate.core.errors import CurateError

# the Hub's size buckets: total rows over every split, upper bound exclusive
SIZE_BUCKETS = ((10 ** 3, "n<1K"), (10 ** 4, "1K<n<10K"), (10 ** 5, "10K<n<100K"), (10 ** 6, "100K<n<1M"),
                (10 ** 7, "1M<n<10M"), (10 ** 8, "10M<n<100M"), (10 ** 9, "100M<n<1B"), (10 ** 10, "1B<n<10B"),
                (10 ** 11, "10B<n<100B"), (10 ** 12, "100B<n<1T"))
# query / positive / negative rows train embedding models for similarity and retrieval
TASK_CATEGORIES = ["sentence-similarity", "text-retrieval"]
# license ids the Hub accepts (hub-docs "Licenses"), those a dataset for this tool is likely to carry
HUB_LICENSES = frozenset("""
apache-2.0 mit bsd-2-clause bsd-3-clause cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0
cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0
cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 odc-by odbl pddl cdla-permissive-1.0 cdla-permissive-2.0
cdla-sharing-1.0 gpl-3.0 lgpl-3.0 agpl-3.0 mpl-2.0 openrail llama2 llama3 gemma unlicense other unknown
""".split())
# BEIR collections by the name ``curate mine --data`` gives them: the Hub dataset and the licence
# its card declares (upstream terms can be narrower: read the source before publishing)
KNOWN_DATASETS = {name: (f"BeIR/{name}", "cc-by-sa-4.0") for name in (
    "scifact", "nfcorpus", "fiqa", "arguana", "scidocs", "trec-covid", "quora", "nq", "hotpotqa", "fever",
    "climate-fever", "dbpedia-entity", "msmarco", "webis-touche2020", "cqadupstack")}


def size_category(rows: int) -> str:
    for bound, name in SIZE_BUCKETS:
        if rows < bound:
            return name
    return "n>1T"


def check_license(value: str | None) -> None:
    if value is not None and value not in HUB_LICENSES:
        raise CurateError(f"--license {value!r} is not a Hugging Face Hub licence id "
                          "(e.g. apache-2.0, mit, cc-by-4.0, cc-by-sa-4.0, odc-by, other)")


def check_language(value: str) -> None:
    if not re.fullmatch(r"[a-z]{2,3}", value):
        raise CurateError(f"--language {value!r}: give an ISO 639 code such as en, de or zh")


def hub_metadata(datasets: list[str], rows: int, license: str | None, languages: list[str]) -> tuple[dict, list[str]]:
    """The card's Hub fields and, when no licence is known, the sources that lack one.

    The licence is ``--license`` when given, else the one of the source datasets when they are
    all known BEIR collections and agree; otherwise ``unknown`` and the caller names what is
    missing. Generated data has no known source: its licence is the user's to state."""
    known = {d: KNOWN_DATASETS[d] for d in datasets if d in KNOWN_DATASETS}
    missing = [d or "generated records" for d in datasets if d not in KNOWN_DATASETS] if license is None else []
    found = {lic for _, lic in known.values()}
    chosen = license or (found.pop() if len(found) == 1 and not missing else "unknown")
    meta = {"license": chosen, "language": list(languages), "task_categories": list(TASK_CATEGORIES),
            "size_categories": [size_category(rows)],
            "source_datasets": sorted({hub for hub, _ in known.values()}) or ["original"]}
    return meta, sorted(set(missing))
