"""Data identity check: the same fixed set of curate runs on two code trees, byte for byte.

A refactor that only moves code around must not change one byte of the data curate writes.
This script runs a fixed list of command-line runs (mine, convert, pipeline, filter, export)
against one tree and writes ``manifest.json``: the SHA-256 of every data file the runs wrote.
Two manifests are then compared.

    # one pass per tree: ~50 s with warm caches (the very first pass, which fills them,
    # took ~45 min on 2 busy cores: the teacher encodes SciFact and NFCorpus, the LLM answers)
    python bench/identity.py --tree /work/baseline --out /work/identity/baseline
    python bench/identity.py --tree /work/main     --out /work/identity/after
    # the verdict: exit 0 only when every data file is identical
    python bench/identity.py --compare /work/identity/baseline/manifest.json \
                                       /work/identity/after/manifest.json
    python bench/identity.py --list    # the runs, as command lines

How the two passes are kept comparable:

* every run executes with ``cwd`` and ``PYTHONPATH`` set to the tree, through
  ``sys.executable -m curate``; before the first run a probe checks that ``curate`` and its
  shipped prompts/, tasks/, filters/, data/ folders resolve inside the tree;
* runs write into one fixed staging folder (``--stage``, the same for every pass), which is
  moved to ``OUT/runs`` at the end: absolute paths that land in data or cards (an export's
  input paths, for one) are then the same whichever tree or ``--out`` is used;
* the LLM request cache (``--llm-cache``) and the embedding cache (``--embed-cache``,
  passed as ``CURATE_CACHE_DIR``) are shared by every pass. The bundled LLM does not repeat
  itself: two pipeline runs with the same seed and empty caches wrote different queries for
  most passages. So the first pass fills the LLM cache and later passes read their answers
  from it. A request a tree changed has a new key: it goes to the model, and the manifest
  counts it under ``llm_cache.new_keys`` (``--compare`` warns); likewise texts the teacher had
  to encode afresh (``embed_cache.new_vectors``). Give ``--embed-cache`` an empty folder to
  have a tree encode everything itself (slow: ~25 min);
* generate puts its records in item order once a run is complete (trees before that wrote them
  in the order their answers arrived), and the pipeline runs with ``--concurrency 1`` so that
  both kinds of tree give one order;
* the inputs made here (convert's examples under ``--inputs``) are written the same way
  every time and hashed into ``inputs``; the small filter inputs cut from mine's output live
  in ``runs/_inputs`` and are hashed as data.

What the manifest leaves out (``excluded``, with the reason for each file): run metadata and
reports (timestamps, durations, versions, absolute paths), plots, logs, caches, lock, marker
and staging files. Dataset cards (``README.md``) are hashed into their own ``cards`` section:
a difference there is shown, and fails only with ``--strict-cards``. Three per-record run
metadata keys inside data files (see ``VOLATILE_KEYS``) are cut out before hashing; the
files concerned are listed under ``normalised`` with their raw hashes under ``raw``.
"""

from __future__ import annotations

import argparse
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

SHARED_DATA = Path("/work/shared/data")
IDENTITY = Path("/work/identity")
DEFAULT_STAGE = IDENTITY / ".stage"
DEFAULT_INPUTS = IDENTITY / "inputs"
DEFAULT_LLM_CACHE = IDENTITY / "cache" / "llm.sqlite"
DEFAULT_EMBED_CACHE = IDENTITY / "cache" / "curate"
MANIFEST_VERSION = 1

CURRICULA = ["none", "ordered", "mgh", "reverse", "random", "fixed:2"]

# Environment variables that would point a run at another backend, model or cache.
SCRUB_ENV = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "CURATE_TEACHER_BASE_URL", "CURATE_TEACHER_API_KEY",
             "CURATE_GGUF", "CURATE_CACHE_DIR", "CURATE_DEBUG", "CURATE_VLLM_PYTHON", "PYTHONPATH",
             "PYTHONHOME", "RAY_ADDRESS")

# ------------------------------------------------------------------ inputs made here

CLASSIFICATION = [
    ("The orchestra tuned up before the overture began.", "music"),
    ("She practised the violin sonata every evening.", "music"),
    ("The drummer kept a steady beat through the solo.", "music"),
    ("A new opera opened at the city theatre last night.", "music"),
    ("The choir sang the anthem in four-part harmony.", "music"),
    ("Tomatoes ripen faster on a sunny windowsill.", "garden"),
    ("Prune the roses back in late winter.", "garden"),
    ("Compost adds nutrients to tired soil.", "garden"),
    ("Water the seedlings early in the morning.", "garden"),
    ("Slugs ate most of the lettuce this spring.", "garden"),
    ("The train to the coast was delayed by an hour.", "travel"),
    ("Pack a light jacket for evenings in the mountains.", "travel"),
    ("Our flight landed just after midnight.", "travel"),
    ("The ferry crosses the strait twice a day.", "travel"),
    ("Book the hostel early during the festival week.", "travel"),
    ("The compiler rejected the unused variable.", "code"),
    ("Tests failed after the dependency was upgraded.", "code"),
    ("A race condition corrupted the shared counter.", "code"),
    ("Refactor the parser before adding new syntax.", "code"),
    ("Prune the roses back in late winter.", "garden"),  # a repeated text, same label
    ("Only one sentence talks about knitting.", "craft"),  # a label with no partner
    ("The festival stage hosted a jazz quartet.", "music"),  # carries two labels
    ("The festival stage hosted a jazz quartet.", "travel"),
]

CLUSTERING = [
    ("Mercury is the planet closest to the sun.", 0),
    ("Saturn's rings are made of ice and rock.", 0),
    ("A comet's tail points away from the sun.", 0),
    ("Jupiter has dozens of known moons.", 0),
    ("The telescope revealed a faint distant galaxy.", 0),
    ("Bread rises as the yeast produces gas.", 1),
    ("Simmer the sauce until it thickens.", 1),
    ("Whisk the egg whites into stiff peaks.", 1),
    ("Roast the vegetables at a high heat.", 1),
    ("Let the dough rest before rolling it out.", 1),
    ("The goalkeeper dived to save the shot.", 2),
    ("The relay team passed the baton cleanly.", 2),
    ("She won the match in straight sets.", 2),
    ("The cyclist attacked on the final climb.", 2),
    ("The referee showed a yellow card.", 2),
    ("Glaciers carve deep valleys over millennia.", 3),
    ("Rivers carry sediment down to the delta.", 3),
    ("Volcanic ash makes very fertile soil.", 3),
    ("Earthquakes happen where plates meet.", 3),
]

STS = [
    ("A child is riding a bicycle down the street.", "A kid rides a bike along the road.", 4.6),
    ("The chef is chopping onions.", "A cook slices an onion.", 4.1),
    ("A cat is sleeping on the windowsill.", "A dog is barking at the door.", 0.6),
    ("Two people are hiking up a mountain.", "A pair of hikers climbs a hill.", 4.3),
    ("The market closed lower on Friday.", "Stocks fell at the end of the week.", 3.8),
    ("A woman is playing the piano.", "A woman is playing the cello.", 2.2),
    ("The plane landed safely in the storm.", "The aircraft touched down despite bad weather.", 4.5),
    ("A man is reading a newspaper.", "A man is reading a newspaper.", 5.0),
    ("The children are building a sandcastle.", "Kids make a castle out of sand on the beach.", 4.4),
    ("Rain is falling on the city.", "The sun shines over the desert.", 0.2),
    ("A boy kicks a football in the park.", "A young boy plays soccer on the grass.", 4.0),
    ("The museum opens at nine.", "The library closes at six.", 1.0),
    ("A chef is chopping onions.", "Someone is cutting vegetables in a kitchen.", 3.6),
]


def jsonl_bytes(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")


def write_if_changed(path: Path, data: bytes) -> None:
    if path.exists() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def make_inputs(inputs: Path) -> None:
    write_if_changed(inputs / "classification.jsonl",
                     jsonl_bytes([{"text": t, "label": lab} for t, lab in CLASSIFICATION]))
    write_if_changed(inputs / "clustering.jsonl",
                     jsonl_bytes([{"text": t, "label": lab} for t, lab in CLUSTERING]))
    write_if_changed(inputs / "sts.jsonl",
                     jsonl_bytes([{"sentence1": a, "sentence2": b, "score": s} for a, b, s in STS]))


def read_lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def make_filter_small(stage: Path) -> None:
    """~12 records that reach every step of the default and strict recipes: real queries with
    mined negatives, claims under a refute task (judge_refute), STS records (sts_gap) and an
    exact copy under another id (minhash)."""
    nq = read_lines(stage / "mine-nq-utd" / "mined.jsonl")
    sf = read_lines(stage / "mine-scifact" / "mined.jsonl")
    sts = read_lines(stage / "convert-sts" / "converted.jsonl")
    out: list[str] = list(nq[:6])
    for line in sf[:3]:
        rec = json.loads(line)
        rec["task"] = "Given a scientific claim, retrieve an abstract that refutes it."
        out.append(json.dumps(rec, ensure_ascii=False))
    out.extend(sts[:2])
    dup = json.loads(nq[0])
    dup["id"] = str(dup["id"]) + "-copy"
    out.append(json.dumps(dup, ensure_ascii=False))
    write_if_changed(stage / "_inputs" / "filter-small.jsonl", ("\n".join(out) + "\n").encode("utf-8"))


def make_relabel_small(stage: Path) -> None:
    """The first 10 mined NQ-UTD records: relabel asks the LLM about each of their negatives."""
    nq = read_lines(stage / "mine-nq-utd" / "mined.jsonl")
    write_if_changed(stage / "_inputs" / "relabel-small.jsonl", ("\n".join(nq[:10]) + "\n").encode("utf-8"))


# ------------------------------------------------------------------ the runs

def plan(stage: Path, inputs: Path, llm_cache: Path) -> list[dict]:
    """The fixed list of runs, in order. Every flag here exists in the baseline's CLI.

    Placeholders are filled in here so that the manifest records the exact argv."""
    S, I, D, C = str(stage), str(inputs), str(SHARED_DATA), str(llm_cache)
    runs: list[dict] = []

    def add(name: str, argv: list[str], before=None) -> None:
        runs.append({"name": name, "argv": argv, "before": before})

    # mine: three BEIR folders, the bundled teacher, a few options each
    add("mine-scifact", ["mine", "--data", f"{D}/scifact", "--split", "train", "--limit", "100",
                         "--task-text", "Given a scientific claim, retrieve abstracts with evidence about it.",
                         "--out", f"{S}/mine-scifact"])
    add("mine-nfcorpus", ["mine", "--data", f"{D}/nfcorpus", "--split", "train", "--limit", "60",
                          "--method", "marginpos", "--levels", "--sample", "softmax", "--seed", "3",
                          "--positive-choice", "teacher",
                          "--task-text", "Given a health question, retrieve relevant medical documents.",
                          "--out", f"{S}/mine-nfcorpus"])
    add("mine-nq-utd", ["mine", "--data", f"{D}/nq-utd", "--split", "test", "--limit", "40",
                        "--method", "window", "--rank-min", "3", "--rank-max", "40", "-k", "3",
                        "--out", f"{S}/mine-nq-utd"])

    # convert: one small input of each kind (made here); clustering with the bundled teacher
    add("convert-classification", ["convert", "--kind", "classification", "--in", f"{I}/classification.jsonl",
                                   "--out", f"{S}/convert-classification"])
    add("convert-clustering", ["convert", "--kind", "clustering", "--in", f"{I}/clustering.jsonl",
                               "--negatives", "3", "--out", f"{S}/convert-clustering", "--teacher"])
    add("convert-sts", ["convert", "--kind", "sts", "--in", f"{I}/sts.jsonl", "--min-score", "3.5",
                        "--out", f"{S}/convert-sts"])

    # pipeline: generate (bundled LLM, shared request cache), filter, mine, export
    # (--concurrency 1: older trees wrote records as their answers came back; one request at a
    # time makes that the order they were asked in, which is item order, on every pass)
    add("pipeline-demo", ["pipeline", "data/demo", "-n", "12", "--format", "all", "--cache", C,
                          "--concurrency", "1", "--out", f"{S}/pipeline-demo"])

    # filter: every shipped recipe
    add("filter-default-scifact", ["filter", "--in", f"{S}/mine-scifact/mined.jsonl", "--recipe", "default",
                                   "--cache", C, "--out", f"{S}/filter-default-scifact"])
    add("filter-default-small", ["filter", "--in", f"{S}/_inputs/filter-small.jsonl", "--recipe", "default",
                                 "--cache", C, "--out", f"{S}/filter-default-small"], before=make_filter_small)
    add("filter-strict-small", ["filter", "--in", f"{S}/_inputs/filter-small.jsonl", "--recipe", "strict",
                                "--cache", C, "--out", f"{S}/filter-strict-small"])
    add("filter-from-corpus", ["filter", "--in", f"{S}/pipeline-demo/generate/generated.jsonl",
                               "--recipe", "from-corpus", "--corpus", f"{S}/pipeline-demo/generate/corpus.jsonl",
                               "--cache", C, "--out", f"{S}/filter-from-corpus"])
    add("filter-relabel", ["filter", "--in", f"{S}/_inputs/relabel-small.jsonl", "--recipe", "relabel",
                           "--cache", C, "--out", f"{S}/filter-relabel"], before=make_relabel_small)

    # export: every curriculum arm, every format, on the mined and converted records
    ins: list[str] = []
    for p in ("mine-scifact/mined.jsonl", "mine-nfcorpus/mined.jsonl", "mine-nq-utd/mined.jsonl",
              "convert-classification/converted.jsonl", "convert-sts/converted.jsonl"):
        ins += ["--in", f"{S}/{p}"]
    for arm in CURRICULA:
        tag = arm.replace(":", "")
        add(f"export-{tag}", ["export", *ins, "--format", "all", "--curriculum", arm,
                              "--out", f"{S}/export-{tag}"])
    # one export through the other layout, levels, instruction and decontamination options
    add("export-options", ["export", *ins, "--in", f"{S}/filter-default-scifact/filtered.jsonl",
                           "--format", "sentence-transformers", "--format", "flagembedding", "--format", "hf",
                           "--curriculum", "mgh", "--gap-levels", "record", "--negatives-per-row", "2",
                           "--batch-size", "8", "--batch-layout", "blended", "--mixed-tail", "1",
                           "--instruction", "nv", "--dev-fraction", "0.1", "--seed", "7",
                           "--decontaminate", f"{D}/scifact:test", "--license", "cc-by-4.0",
                           "--out", f"{S}/export-options"])
    add("export-fixed-order", ["export", "--in", f"{S}/mine-scifact/mined.jsonl",
                               "--in", f"{S}/mine-nfcorpus/mined.jsonl", "--in", f"{S}/mine-nq-utd/mined.jsonl",
                               "--format", "tevatron", "--format", "nemo", "--curriculum", "ordered",
                               "--negatives-per-row", "all", "--batch-size", "16", "--task-order", "fixed",
                               "--instruction", "e5", "--dev-fraction", "0",
                               "--out", f"{S}/export-fixed-order"])
    return runs


# ------------------------------------------------------------------ manifest rules

# (pattern on the path relative to OUT/runs or on the file name, reason); first match wins
EXCLUDE = [
    ("*/.cache/*", "cache"),
    (".cache/*", "cache"),
    ("*/logs/*", "log"),
    ("logs/*", "log"),
    (".*", "lock, marker or staging file (name starts with '.')"),
    ("run.json", "run metadata: start time, seconds, versions"),
    ("*report*.json", "report: timings, counts, absolute paths"),
    ("summary.json", "run summary: timings"),
    ("convert_summary.json", "run summary: timings"),
    ("pipeline.json", "pipeline funnel: timings"),
    ("funnel*.json", "pipeline funnel: timings"),
    ("report.json", "report: timings"),
    ("report.html", "the report page: a view of the run, with the time it was made and its timings"),
    ("*.png", "plot (image encoder metadata)"),
    ("*.sqlite", "cache database"),
    ("*.sqlite-*", "cache database"),
]
CARD_NAMES = {"README.md"}

# Run metadata that generate writes into each record's meta (curate/generate/examples.py) and
# every later stage carries along: the wall-clock time it was written, how long its request
# took, and whether the answer came from the cache. No harness setting can make them repeat,
# so in JSONL data files these keys (key and value, nothing else) are cut out of the raw line
# before hashing; the raw hash is kept too (``raw``) and such files are listed in ``normalised``.
VOLATILE_KEYS = ("created", "latency_s", "from_cache")
_JSON_VALUE = r'(?:"(?:[^"\\]|\\.)*"|true|false|null|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)'
_KEYS = "(?:" + "|".join(VOLATILE_KEYS) + ")"
_VOLATILE_AFTER = re.compile(r'\s*,\s*"' + _KEYS + r'"\s*:\s*' + _JSON_VALUE)   # ,"k":v
_VOLATILE_FIRST = re.compile(r'(?<=\{)\s*"' + _KEYS + r'"\s*:\s*' + _JSON_VALUE + r'\s*,?')  # {"k":v,


def _cut_text(text: str) -> tuple[str, int]:
    new, n1 = _VOLATILE_AFTER.subn("", text)
    new, n2 = _VOLATILE_FIRST.subn("", new)
    return new, n1 + n2


def normalise_jsonl(raw: bytes) -> tuple[bytes, int]:
    """The file with every volatile key/value pair cut out of each line, and how many were cut.

    A line is only changed when the cut version still parses as JSON; the cut is textual, so
    every other byte (key order, spacing, escaping) is compared as written."""
    out: list[bytes] = []
    cut = 0
    for line in raw.split(b"\n"):
        text = line.decode("utf-8", "surrogateescape")
        if any(f'"{k}"' in text for k in VOLATILE_KEYS):
            new, n = _cut_text(text)
            if n:
                try:
                    json.loads(new)
                except ValueError:
                    pass
                else:
                    text, cut = new, cut + n
        out.append(text.encode("utf-8", "surrogateescape"))
    return b"\n".join(out), cut


def normalised_parquet_hash(path: Path) -> tuple[str, int] | None:
    """For a Parquet file whose string columns hold the volatile keys (the hf format keeps each
    record's meta as a JSON string): a hash of its content with those keys cut, else None.

    The content: the Arrow schema (with the file's key-value metadata) and every column,
    written as one Arrow IPC stream after the cut. Files without volatile keys are hashed
    as raw bytes by the caller."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path).combine_chunks()
    cut = 0
    columns = []
    for name, col in zip(table.column_names, table.columns):
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            values = col.to_pylist()
            if any(v is not None and any(f'"{k}"' in v for k in VOLATILE_KEYS) for v in values):
                new = []
                for v in values:
                    if v is None:
                        new.append(v)
                        continue
                    t, n = _cut_text(v)
                    cut += n
                    new.append(t)
                col = pa.chunked_array([pa.array(new, type=col.type)])
        columns.append(col)
    if not cut:
        return None
    table = pa.Table.from_arrays(columns, schema=table.schema)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    h = hashlib.sha256(b"parquet-content-v1\n")
    h.update(sink.getvalue().to_pybytes())
    return h.hexdigest(), cut


def classify(rel: str) -> tuple[str, str | None]:
    """('excluded', reason), ('cards', None) or ('data', None) for a path relative to the runs."""
    name = rel.rsplit("/", 1)[-1]
    parts = rel.split("/")
    for pattern, reason in EXCLUDE:
        if "/" in pattern:
            if fnmatch.fnmatchcase(rel, pattern):
                return "excluded", reason
        elif fnmatch.fnmatchcase(name, pattern) or (pattern == ".*" and any(p.startswith(".") for p in parts)):
            return "excluded", reason
    if name in CARD_NAMES:
        return "cards", None
    return "data", None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def hash_tree(root: Path, prefix: str) -> dict[str, dict]:
    out: dict[str, dict] = {"data": {}, "cards": {}, "excluded": {}, "raw": {}, "normalised": {}}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            p = Path(dirpath) / fn
            rel = p.relative_to(root).as_posix()
            section, reason = classify(rel)
            key = f"{prefix}/{rel}"
            if section == "excluded":
                out["excluded"][key] = reason
            elif p.is_symlink() or not p.is_file():
                out["excluded"][key] = "not a plain file"
            elif section == "data" and fn.endswith(".parquet"):
                got = normalised_parquet_hash(p)
                raw_hash = sha256_file(p)
                if got is None:
                    out["data"][key] = raw_hash
                else:
                    out["data"][key], out["normalised"][key] = got
                    out["raw"][key] = raw_hash
            elif section == "data" and fn.endswith(".jsonl"):
                raw = p.read_bytes()
                norm, cut = normalise_jsonl(raw)
                out["data"][key] = hashlib.sha256(norm).hexdigest()
                if cut:
                    out["raw"][key] = hashlib.sha256(raw).hexdigest()
                    out["normalised"][key] = cut
            else:
                out[section][key] = sha256_file(p)
    return out


def hash_sections(out: Path) -> dict:
    hashed = hash_tree(out / "runs", "runs")
    return {
        "data": hashed["data"],
        "cards": hashed["cards"],
        "excluded": hashed["excluded"],
        "normalised": {"keys": list(VOLATILE_KEYS), "files": hashed["normalised"]},
        "raw": hashed["raw"],
    }


def rehash(out_dir: str) -> int:
    """Hash an earlier pass's runs/ again under the current rules (no run is repeated)."""
    out = Path(out_dir).resolve()
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(hash_sections(out))
    path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"identity: {len(manifest['data'])} data files, {len(manifest['cards'])} cards, "
          f"{len(manifest['excluded'])} excluded; wrote {path}")
    return 0


# ------------------------------------------------------------------ caches

def count_llm_keys(path: Path) -> set[str]:
    if not path.exists():
        return set()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in db.execute("SELECT key FROM answers")}
    except sqlite3.Error:
        return set()
    finally:
        db.close()


def count_vectors(cache_dir: Path) -> int:
    db_path = cache_dir / "embeddings" / "vectors.sqlite"
    if not db_path.exists():
        return 0
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


# ------------------------------------------------------------------ one pass

def tree_env(tree: Path, embed_cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUB_ENV}
    env["PYTHONPATH"] = str(tree)
    env["CURATE_CACHE_DIR"] = str(embed_cache)
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # leave the trees' files alone
    env["NO_COLOR"] = "1"
    env.setdefault("COLUMNS", "120")
    return env


def check_tree(tree: Path, env: dict[str, str]) -> dict[str, str]:
    """The package and shipped folders a run in this tree will use; all must lie in the tree."""
    probe = (
        "import json, curate\n"
        "out = {'curate': curate.__file__}\n"
        "try:\n"
        "    from curate.core.resources import resource_dir\n"
        "    for k in ('prompts', 'tasks', 'filters', 'data'):\n"
        "        out[k] = str(resource_dir(k))\n"
        "except Exception as e:\n"
        "    out['resources_error'] = repr(e)\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", probe], check=False, cwd=tree, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"identity: cannot import curate from {tree}:\n{res.stderr}")
    found = json.loads(res.stdout.strip().splitlines()[-1])
    root = tree.resolve()
    for k, v in found.items():
        if k == "resources_error":
            print(f"identity: warning: {v} (resource folders not checked)", file=sys.stderr)
            continue
        if not Path(v).resolve().is_relative_to(root):
            sys.exit(f"identity: {k} resolves to {v}, outside the tree {root}")
    return found


def run_pass(args: argparse.Namespace) -> int:
    tree = Path(args.tree).resolve()
    out = Path(args.out).resolve()
    stage = Path(args.stage).resolve()
    inputs = Path(args.inputs).resolve()
    llm_cache = Path(args.llm_cache).resolve()
    embed_cache = Path(args.embed_cache).resolve()
    if out == stage or stage in out.parents or out in stage.parents:
        sys.exit("identity: --out and --stage must be separate folders")
    env = tree_env(tree, embed_cache)
    found = check_tree(tree, env)
    print(f"identity: tree {tree}: curate from {found['curate']}", flush=True)

    lock_path = stage.parent / (stage.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.exit(f"identity: another pass holds {lock_path}")
        if out.exists():
            if any(out.iterdir()) and not (out / "manifest.json").exists() and not (out / "runs").exists():
                sys.exit(f"identity: {out} is not empty and holds no earlier pass; choose another --out")
            shutil.rmtree(out)
        out.mkdir(parents=True)
        (out / "logs").mkdir()
        if stage.exists():
            shutil.rmtree(stage)
        stage.mkdir(parents=True)
        make_inputs(inputs)
        llm_cache.parent.mkdir(parents=True, exist_ok=True)
        embed_cache.mkdir(parents=True, exist_ok=True)
        llm_before = count_llm_keys(llm_cache)
        vec_before = count_vectors(embed_cache)

        runs = plan(stage, inputs, llm_cache)
        if args.only:
            wanted = set(args.only)
            runs = [r for r in runs if r["name"] in wanted]
        results = []
        t_pass = time.monotonic()
        for r in runs:
            argv = [sys.executable, "-m", "curate", *r["argv"]]
            t0 = time.monotonic()
            note = None
            try:
                if r["before"] is not None:
                    r["before"](stage)
            except (OSError, ValueError, KeyError) as e:
                note = f"input not made: {e!r}"
            rc = None
            log_path = out / "logs" / f"{r['name']}.log"
            if note is None:
                with open(log_path, "w") as log:
                    log.write("$ cd " + str(tree) + " && " + " ".join(argv) + "\n\n")
                    log.flush()
                    rc = subprocess.run(argv, check=False, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL).returncode
            secs = round(time.monotonic() - t0, 1)
            status = "ok" if rc == 0 else (note or f"exit {rc} (see {log_path})")
            print(f"identity: {r['name']:<26} {secs:7.1f}s  {status}", flush=True)
            results.append({"name": r["name"], "argv": r["argv"], "rc": rc, "note": note, "seconds": secs})
        total = round(time.monotonic() - t_pass, 1)

        llm_after = count_llm_keys(llm_cache)
        vec_after = count_vectors(embed_cache)
        shutil.move(str(stage), str(out / "runs"))

    manifest = {
        "version": MANIFEST_VERSION,
        "tree": str(tree),
        "curate": found,
        "stage": str(stage),
        "python": sys.executable,
        "runs": [{k: v for k, v in r.items() if k != "seconds"} for r in results],
        "failed": sorted(r["name"] for r in results if r["rc"] != 0),
        "inputs": {str(p.relative_to(inputs)): sha256_file(p) for p in sorted(inputs.glob("*.jsonl"))},
        **hash_sections(out),
        "llm_cache": {"path": str(llm_cache), "keys_before": len(llm_before), "keys_after": len(llm_after),
                      "new_keys": len(llm_after - llm_before)},
        "embed_cache": {"path": str(embed_cache), "vectors_before": vec_before, "vectors_after": vec_after,
                        "new_vectors": vec_after - vec_before},
        "timings": {"total_seconds": total, **{r["name"]: r["seconds"] for r in results}},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"identity: {len(results)} runs in {total:.0f}s, {len(manifest['failed'])} failed; "
          f"{len(manifest['data'])} data files, {len(manifest['cards'])} cards, "
          f"{len(manifest['excluded'])} excluded; new LLM requests {manifest['llm_cache']['new_keys']}, "
          f"new vectors {manifest['embed_cache']['new_vectors']}", flush=True)
    print(f"identity: wrote {out / 'manifest.json'}")
    return 1 if manifest["failed"] else 0


# ------------------------------------------------------------------ compare

def diff_section(a: dict[str, str], b: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    only_a = sorted(set(a) - set(b))
    only_b = sorted(set(b) - set(a))
    differ = sorted(k for k in set(a) & set(b) if a[k] != b[k])
    return only_a, only_b, differ


def compare(path_a: str, path_b: str, strict_cards: bool) -> int:
    a = json.loads(Path(path_a).read_text())
    b = json.loads(Path(path_b).read_text())
    bad = False
    print(f"A: {path_a} (tree {a.get('tree')})")
    print(f"B: {path_b} (tree {b.get('tree')})")

    if [(r["name"], r["argv"]) for r in a["runs"]] != [(r["name"], r["argv"]) for r in b["runs"]]:
        bad = True
        print("\nRUNS DIFFER: the two passes did not run the same commands")
        names_a = [r["name"] for r in a["runs"]]
        names_b = [r["name"] for r in b["runs"]]
        for n in sorted(set(names_a) ^ set(names_b)):
            print(f"  only in {'A' if n in names_a else 'B'}: {n}")
    for side, m in (("A", a), ("B", b)):
        if m["failed"]:
            bad = True
            print(f"\nFAILED RUNS in {side}: {', '.join(m['failed'])}")
    if a.get("inputs") != b.get("inputs"):
        bad = True
        print("\nINPUTS DIFFER: the inputs made for the runs are not the same")
    if a.get("stage") != b.get("stage"):
        print(f"\nwarning: the passes used different staging folders ({a.get('stage')} vs {b.get('stage')}); "
              "absolute paths in the data will differ")

    def show(title: str, x: dict, y: dict) -> int:
        only_a, only_b, differ = diff_section(x, y)
        n = len(only_a) + len(only_b) + len(differ)
        same = len(set(x) & set(y)) - len(differ)
        print(f"\n{title}: {same} identical, {len(differ)} differ, {len(only_a)} only in A, {len(only_b)} only in B")
        for label, items in (("only in A", only_a), ("only in B", only_b), ("differ", differ)):
            for k in items:
                print(f"  {label}: {k}")
        return n

    if show("DATA", a["data"], b["data"]):
        bad = True
    if show("CARDS (README.md)", a["cards"], b["cards"]) and strict_cards:
        bad = True
    ex_a, ex_b = set(a["excluded"]), set(b["excluded"])
    if ex_a != ex_b:
        print(f"\nexcluded files (not compared): {len(ex_a - ex_b)} only in A, {len(ex_b - ex_a)} only in B")
        for k in sorted(ex_a ^ ex_b):
            print(f"  only in {'A' if k in ex_a else 'B'}: {k}  ({(a['excluded'].get(k) or b['excluded'].get(k))})")
    norm_a, norm_b = a.get("normalised", {}).get("files", {}), b.get("normalised", {}).get("files", {})
    if norm_a or norm_b:
        raw_differ = sorted(k for k in set(a.get("raw", {})) & set(b.get("raw", {}))
                            if a["raw"][k] != b["raw"][k] and a["data"].get(k) == b["data"].get(k))
        keys = ", ".join(a.get("normalised", {}).get("keys", []))
        print(f"\nnormalised files (JSONL lines, Parquet string columns: the keys {keys} cut out before hashing): "
              f"{len(set(norm_a) | set(norm_b))}; identical once cut but not as raw bytes: {len(raw_differ)}")
        if set(norm_a) != set(norm_b):
            bad = True
            print("  NORMALISED FILES DIFFER (a file holds volatile keys in one pass only):")
            for k in sorted(set(norm_a) ^ set(norm_b)):
                print(f"    only in {'A' if k in norm_a else 'B'}: {k}")
        for k in sorted(set(norm_a) & set(norm_b)):
            if norm_a[k] != norm_b[k]:
                bad = True
                print(f"  keys cut differ: {k}: {norm_a[k]} vs {norm_b[k]}")
    for side, m in (("A", a), ("B", b)):
        if m["embed_cache"]["new_vectors"] and m["embed_cache"]["vectors_before"]:
            print(f"\nwarning: pass {side} encoded {m['embed_cache']['new_vectors']} texts no earlier pass had "
                  "cached: its teacher inputs (texts, prompts or model id) changed")
        if m["llm_cache"]["new_keys"] and m["llm_cache"]["keys_before"]:
            print(f"\nwarning: pass {side} sent {m['llm_cache']['new_keys']} LLM requests no earlier pass had "
                  "sent: its prompts or request parameters changed (its LLM answers are fresh samples)")
    ta, tb = a["timings"]["total_seconds"], b["timings"]["total_seconds"]
    print(f"\npass time: A {ta:.0f}s, B {tb:.0f}s")
    print("\nRESULT: " + ("DIFFERENT" if bad else "IDENTICAL data"))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="the code tree to run (cwd and PYTHONPATH of every run)")
    ap.add_argument("--out", help="folder for this pass: runs/, logs/ and manifest.json (replaced)")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two manifest.json files")
    ap.add_argument("--strict-cards", action="store_true", help="--compare: a differing card fails too")
    ap.add_argument("--stage", default=str(DEFAULT_STAGE),
                    help="fixed folder the runs write into (keep it the same for every pass)")
    ap.add_argument("--inputs", default=str(DEFAULT_INPUTS), help="folder for the inputs made here")
    ap.add_argument("--llm-cache", default=str(DEFAULT_LLM_CACHE), help="LLM request cache shared by every pass")
    ap.add_argument("--embed-cache", default=str(DEFAULT_EMBED_CACHE),
                    help="CURATE_CACHE_DIR shared by every pass (teacher embeddings)")
    ap.add_argument("--only", action="append", help="run only this run (repeatable; for debugging the harness)")
    ap.add_argument("--list", action="store_true", help="print the runs and exit")
    ap.add_argument("--rehash", metavar="OUT", help="hash an earlier pass's files again (after a rule change)")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(args.compare[0], args.compare[1], args.strict_cards)
    if args.rehash:
        return rehash(args.rehash)
    if args.list:
        for r in plan(Path(args.stage), Path(args.inputs), Path(args.llm_cache)):
            print(f"{r['name']}: curate " + " ".join(r["argv"]))
        return 0
    if not args.tree or not args.out:
        ap.error("give --tree and --out (or --compare A B)")
    return run_pass(args)


if __name__ == "__main__":
    sys.exit(main())
