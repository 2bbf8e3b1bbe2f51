"""``curate data``: the public retrieval collections the docs use (``curate.datasets.fetch``)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def data() -> None:
    """Fetch the public retrieval collections the docs use (SciFact, NFCorpus, NQ-UTD).

    Each lands in DIR/NAME as a BEIR folder (corpus.jsonl, queries.jsonl, qrels/), checked
    against its published checksum. They are for research use: see each publisher's licence.
    """


@data.command("list")
def list_command() -> None:
    """The collections `curate data get` knows."""
    from curate.datasets.fetch import COLLECTIONS

    for c in COLLECTIONS.values():
        click.echo(f"{c.name:9} {c.about}\n{'':9} {c.url}")


@data.command("get")
@click.argument("names", nargs=-1, required=True)
@click.option("--dir", "data_dir", default="datasets", show_default=True, type=click.Path(file_okay=False),
              help="Folder the collections go in, one sub-folder each (DIR/NAME).")
@click.option("--url", default=None, help="Fetch NAME from this address instead (a mirror, or any BEIR zip).")
@click.option("--sha256", default=None, help="The SHA-256 of the zip at --url (required with it).")
def get_command(names: tuple[str, ...], data_dir: str, url: str | None, sha256: str | None) -> None:
    """Download NAMES (see `curate data list`) into DIR/NAME; a second run resumes a broken
    download, and a zip placed by hand at DIR/NAME.zip is checked and unpacked without network.

    NAME is a folder name, never a path. A DIR/NAME that curate did not make is never replaced,
    nor one holding another zip's collection. Credentials in --url (user:password@, a signed
    query) are sent but shown and recorded as ***. One unpacked file may be at most 64 GiB
    ($CURATE_DATA_MAX_MEMBER, in bytes, sets another limit)."""
    from curate.core.errors import CurateError
    from curate.datasets.fetch import collection, get

    if url is not None and len(names) > 1:
        raise CurateError("--url names one zip: give one NAME with it")
    wanted = [collection(name, url, sha256) for name in names]  # every NAME checked before any is fetched
    for c in wanted:
        folder, how = get(c, Path(data_dir))
        click.echo(f"{c.name}: {how} -> {folder}")
