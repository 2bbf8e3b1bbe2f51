"""Generate's one queue sharded over client processes: ``--executor ray --workers N``.

One client process keeps a few thousand requests a second in flight (bench/generate_client.py);
a fleet of servers can answer more. With N shards the queue (``curate.generate.queue``: every
family's items, interleaved) is dealt to N Ray actors, each a client process of its own with
its share of the ``--base-url`` servers: the servers dealt round-robin (shard k gets servers
k, k+N, ...), or, with fewer servers than shards, shard k asks server k mod S and the shards on
one server split its ``--concurrency``, so a server never has more requests in flight than one
process would send it. Items are dealt in queue order in proportion to each shard's share of
the servers, so every shard still interleaves the families. The shards share the run's request
cache (one SQLite file), so the run folder must be on a file system every Ray node sees.

Each shard appends its records and failures to part files of its own (``OUT/.curate-parts/``),
never to ``generated.jsonl`` itself; when the shards are done (or fail) the parts are folded into
``generated.jsonl`` and ``failed.jsonl``, skipping any id already there, and removed. A run
killed before that leaves the parts, which the next run on the folder folds in first
(``merge_parts``), unless its options changed (another fingerprint: the parts are dropped with
the rest of the old run's records), so nothing finished is lost or written twice. The item ids,
seeds and prompts are those of one process, and the finished file is put in item order, so the
records are the same.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from curate.core.progress import RunStats
from curate.generate.examples import FAILED, GENERATED, finished_ids
from curate.generate.queue import QueueWork, Sink, requests_by_family, run_queue

PARTS = ".curate-parts"  # the shards' own records and failures until they are folded in
_NOTE = "fingerprint.json"  # the run the parts belong to


def shard_servers(urls: Sequence[str], n: int, concurrency: int) -> list[tuple[list[str], int]]:
    """Each of ``n`` shards' servers and requests in flight per server: servers dealt round-robin;
    with fewer servers than shards, shard k asks server k mod S, and the shards on a server split
    its concurrency (at least one each)."""
    urls = list(urls)
    if len(urls) >= n:
        return [(urls[k::n], concurrency) for k in range(n)]
    sharing = [len(range(u, n, len(urls))) for u in range(len(urls))]
    return [([urls[k % len(urls)]], max(1, concurrency // sharing[k % len(urls)])) for k in range(n)]


def deal(queue: Sequence[Any], weights: Sequence[int]) -> list[list[Any]]:
    """``queue`` dealt in order to shards in proportion to ``weights`` (equal weights: round-robin)."""
    parts: list[list[Any]] = [[] for _ in weights]
    for entry in queue:
        k = min(range(len(weights)), key=lambda i: ((len(parts[i]) + 1) / weights[i], i))
        parts[k].append(entry)
    return parts


def part_paths(out_dir: Path, shard: int) -> tuple[Path, Path]:
    """Where shard ``shard`` appends its records and its failures."""
    parts = Path(out_dir) / PARTS
    return (parts / f"{Path(GENERATED).stem}-{shard}.jsonl", parts / f"{Path(FAILED).stem}-{shard}.jsonl")


def _run_fingerprint(out_dir: Path) -> Any:
    """The fingerprint of the run that began in ``out_dir`` (curate.core.stage), None if unknown."""
    from curate.core.stage import STARTED

    try:
        return json.loads((out_dir / STARTED).read_text(encoding="utf-8")).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def merge_parts(out_dir: Path) -> int:
    """Fold the shards' part files into ``generated.jsonl`` and ``failed.jsonl`` (lines moved as
    they are, skipping ids already finished there) and remove them; parts of a run with other
    options are removed unread. Safe to repeat after a kill at any point. Returns lines moved."""
    out_dir = Path(out_dir)
    parts = out_dir / PARTS
    if not parts.is_dir():
        return 0
    try:
        note = json.loads((parts / _NOTE).read_text(encoding="utf-8")).get("fingerprint")
    except (OSError, ValueError, AttributeError):
        note = None
    moved = 0
    if note == _run_fingerprint(out_dir):
        from curate.core.jsonl import trim_partial_tail

        done = finished_ids(out_dir)  # trims a half-written last line of either file first
        for name in (GENERATED, FAILED):
            files = sorted(parts.glob(f"{Path(name).stem}-*.jsonl"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
            if not files:
                continue
            with (out_dir / name).open("ab") as dst:
                for part in files:
                    trim_partial_tail(part)
                    with part.open("rb") as src:
                        for raw in src:
                            try:
                                rec_id = json.loads(raw).get("id") if raw.strip() else None
                            except (ValueError, AttributeError):
                                rec_id = None
                            if rec_id is None or rec_id in done:
                                continue
                            done.add(rec_id)
                            dst.write(raw)
                            moved += 1
                dst.flush()
                os.fsync(dst.fileno())
    shutil.rmtree(parts, ignore_errors=True)
    return moved


def merge_stats(into: RunStats, part: RunStats) -> None:
    """A shard's numbers for a family added to the family's."""
    into.ok += part.ok
    into.failed += part.failed
    into.reasons.update(part.reasons)
    into.prompt_tokens += part.prompt_tokens
    into.completion_tokens += part.completion_tokens
    into.cached += part.cached
    for key, value in part.extra.items():
        if isinstance(value, int) and not isinstance(value, bool):
            into.extra[key] = into.extra.get(key, 0) + value


class _Shard:
    """A Ray actor: one client process asking for its share of the queue (async, so the driver
    can ask how far it got while it works)."""

    def __init__(self) -> None:
        self.done: list[int] = []

    async def ready(self) -> bool:
        return True

    async def progress(self) -> list[int]:
        """Items finished so far, per family."""
        return list(self.done)

    async def run(self, shard: int, cfg: Any, cache_path: str | None, work: QueueWork) -> list[tuple[RunStats, int, int]]:
        """This shard's part of the queue (``work``: its entries and their retried ids) against
        its own servers (``cfg``), into its own part files."""
        from curate.llm.backend import open_backend
        from curate.llm.cache import RequestCache

        n = len(work.specs)
        self.done = [0] * n
        sink = Sink(*part_paths(Path(work.out_dir), shard), [RunStats(stage="generate") for _ in range(n)],
                    [[0, 0] for _ in range(n)])
        stats, tallies = sink.stats, sink.tallies
        cache = RequestCache(cache_path)
        client = open_backend(cfg, cache)

        def one_done(k: int) -> None:
            self.done[k] += 1

        try:
            await run_queue(work, client, sink, one_done)
            sent = client.requests_sent
        finally:
            await client.close()
            cache.close()
        requests = requests_by_family(tallies, sent, [s.ok + s.failed for s in stats])
        return [(s, n, t[1]) for s, n, t in zip(stats, requests, tallies)]


def run_sharded(families: Sequence[Any], work: QueueWork, cfg: Any, cache_path: Path | None, executor: Any,
                advance: Callable[[int, int], None], timings: dict[str, float]) -> None:
    """The queue on ``executor.shards`` Ray actors, each against its share of ``cfg``'s servers;
    ``advance(family, n)`` as their items finish; each family's stats gain its shards' numbers;
    the parts are folded in at the end, whatever happens."""
    from curate.core.executor import _get, ray_for, remote

    queue, out_dir = work.entries, work.out_dir
    servers = shard_servers(cfg.base_urls, executor.shards, cfg.concurrency)
    dealt = deal(queue, [len(urls) * conc for urls, conc in servers])
    shards = [(k, servers[k], part) for k, part in enumerate(dealt) if part]
    started = time.perf_counter()
    ray = ray_for(executor)
    parts = out_dir / PARTS
    parts.mkdir(parents=True, exist_ok=True)
    (parts / _NOTE).write_text(json.dumps({"fingerprint": _run_fingerprint(out_dir)}), encoding="utf-8")
    actor = remote(ray, _Shard, executor)
    actors = [actor.remote() for _ in shards]
    try:
        _get(ray, [a.ready.remote() for a in actors])
        timings["shards_start_s"] = time.perf_counter() - started  # Ray and the client processes up
        refs = [a.run.remote(k, replace(cfg, base_urls=urls, concurrency=conc), str(cache_path) if cache_path else None,
                             replace(work, entries=part, specs=list(work.specs),
                                     retried={it.id for _, it in part} & work.retried))
                for a, (k, (urls, conc), part) in zip(actors, shards)]
        seen = [[0] * len(families) for _ in actors]

        def poll() -> None:
            for i, counts in enumerate(_get(ray, [a.progress.remote() for a in actors])):
                for k, c in enumerate(counts):
                    if c > seen[i][k]:
                        advance(k, c - seen[i][k])
                        seen[i][k] = c

        pending = list(refs)
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            _get(ray, ready)  # a shard that failed stops the run now, with its own error
            poll()
        results = _get(ray, refs)
    finally:
        for a in actors:
            ray.kill(a)
        merge_parts(out_dir)
    for shard in results:
        for f, (part, requests, hits) in zip(families, shard):
            merge_stats(f.stats, part)
            f.stats.requests += requests
            f.stats.extra["cache_hits"] = f.stats.extra.get("cache_hits", 0) + hits
