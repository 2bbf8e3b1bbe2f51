"""``curate data get``: the public retrieval collections the docs use, fetched into a BEIR folder.

A collection is one zip at a public address with a known checksum. It is downloaded to
``DIR/NAME.zip.part`` (a second run asks the server for the rest only, HTTP ``Range``), checked
against its checksum before anything is unpacked, and unpacked into ``DIR/NAME`` (``corpus.jsonl``,
``queries.jsonl``, ``qrels/SPLIT.tsv``) through a staging folder, so the folder either holds the
whole collection or nothing. A zip placed by hand at ``DIR/NAME.zip`` (a machine without network)
is used as it is, after the same check. Licences stay the publishers': the collections are for
research use and are never copied into curate.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import shutil
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from curate.core.errors import CurateError

BEIR = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
COCKTAIL = "https://github.com/KID-22/Cocktail/raw/d070bccd55e643c8c9d018ef65e5825099e97550/dataset"
CHUNK = 1 << 16
DONE = ".curate-data.json"  # written last into a finished folder: what was unpacked, from what


@dataclass(frozen=True)
class Collection:
    """One fetchable collection: where its zip is, its checksum (``sha256`` or ``md5``, whichever
    the publisher gives), the members that become another file of the BEIR folder (``rename``)
    and those left out (``skip``, by prefix). A folder every member sits in (BEIR's zips have
    one) is not part of the paths."""

    name: str
    url: str
    about: str
    sha256: str | None = None
    md5: str | None = None
    rename: dict[str, str] = field(default_factory=dict)
    skip: tuple[str, ...] = ()


COLLECTIONS = {c.name: c for c in (
    Collection("scifact", f"{BEIR}/scifact.zip", "SciFact (BEIR): 5,183 abstracts, 1,109 claims; qrels train/test",
               sha256="536e14446a0ba56ed1398ab1055f39fe852686ecad24a6306c80c490fa8e0165",
               md5="5f7d1de60b170fc8027bb7898e2efca1"),
    Collection("nfcorpus", f"{BEIR}/nfcorpus.zip", "NFCorpus (BEIR): 3,633 medical documents, 3,237 queries; "
               "graded qrels train/dev/test", md5="a89dba18a62ef92f7d323ec890a0d38d"),
    Collection("nq-utd", f"{COCKTAIL}/nq-utd.zip", "NQ-UTD (Cocktail): 800 web snippets, 80 recent-event questions, "
               "10 graded judgements each", sha256="6cdb83ea352ed948caee82c914213e7f4e892a68e5f895bef07d8fc162744d02",
               rename={"corpus/human.jsonl": "corpus.jsonl"}, skip=("corpus/",)),
)}


def collection(name: str, url: str | None = None, sha256: str | None = None) -> Collection:
    """A known collection by name, or (``url`` and ``sha256`` given) any BEIR-layout zip."""
    if url is not None:
        if not sha256:
            raise CurateError("--url needs --sha256: a download is only unpacked once its checksum is known")
        known = COLLECTIONS.get(name)
        return Collection(name, url, known.about if known else name, sha256=sha256.lower(),
                          rename=known.rename if known else {}, skip=known.skip if known else ())
    if name not in COLLECTIONS:
        raise CurateError(f"unknown collection {name!r}; known: {', '.join(COLLECTIONS)} "
                          "(any other BEIR zip: --url URL --sha256 HEX)")
    return COLLECTIONS[name]


def get(c: Collection, data_dir: Path) -> tuple[Path, str]:
    """Fetch and unpack ``c`` into ``data_dir / c.name``; (the folder, what was done)."""
    target = data_dir / c.name
    if (target / DONE).exists():
        return target, "already there"
    if (target / "corpus.jsonl").exists() and (target / "queries.jsonl").exists():
        return target, "already there (placed by hand)"
    data_dir.mkdir(parents=True, exist_ok=True)
    placed = data_dir / f"{c.name}.zip"
    if placed.exists():
        _verify(c, placed, placed_by_hand=True)
        zip_path, how = placed, f"unpacked {placed}"
    else:
        zip_path = _download(c, data_dir)
        how = f"downloaded {c.url}"
    _unpack(c, zip_path, target)
    if how.startswith("downloaded"):  # a zip placed by hand is the user's: it stays
        zip_path.unlink()
    return target, how


def _download(c: Collection, data_dir: Path) -> Path:
    part = data_dir / f"{c.name}.zip.part"
    have = part.stat().st_size if part.exists() else 0
    request = urllib.request.Request(c.url, headers={"User-Agent": "curate", **({"Range": f"bytes={have}-"} if have else {})})
    try:
        response = urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the part is already whole
            return _finish(c, part)
        raise CurateError(f"{c.url}: the server answered {e.code} {e.reason}. {_by_hand(c, data_dir)}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise CurateError(f"cannot reach {c.url} ({reason}). {_by_hand(c, data_dir)}") from None
    with response:
        resumed = have and response.status == 206
        if not resumed:
            have = 0  # the server sent the whole file: start the part again
        total = int(response.headers.get("Content-Length") or 0) + have
        from curate.core.progress import track

        with track(total, f"download {c.name} (bytes)") as advance, part.open("ab" if resumed else "wb") as fh:
            advance(have)
            got = have
            try:
                while chunk := response.read(CHUNK):
                    fh.write(chunk)
                    got += len(chunk)
                    advance(len(chunk))
                if total and got < total:  # the connection closed early
                    raise http.client.IncompleteRead(b"", total - got)
            except (OSError, http.client.HTTPException) as e:
                raise CurateError(f"{c.url}: the download broke off after {got:,} of {total:,} bytes ({e!r}); "
                                  f"run the same command again to fetch the rest ({part} keeps what came)") from None
    return _finish(c, part)


def _finish(c: Collection, part: Path) -> Path:
    _verify(c, part)
    whole = part.with_suffix("")  # NAME.zip
    part.replace(whole)
    return whole


def _verify(c: Collection, path: Path, placed_by_hand: bool = False) -> None:
    sha, md5 = hashlib.sha256(), hashlib.md5()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            sha.update(chunk)
            md5.update(chunk)
    want, got, kind = (c.sha256, sha.hexdigest(), "SHA-256") if c.sha256 else (c.md5, md5.hexdigest(), "MD5")
    if want is not None and got != want:
        if not placed_by_hand:
            path.unlink()  # a bad download is not resumed from
        raise CurateError(f"{path}: {kind} {got} is not the published {want}; "
                          + ("replace the file with the one from " + c.url if placed_by_hand
                             else "the file was removed: run the same command again"))


def _unpack(c: Collection, zip_path: Path, target: Path) -> None:
    staging = target.with_name(f".{target.name}.unpacking")
    shutil.rmtree(staging, ignore_errors=True)
    written = []
    try:
        with zipfile.ZipFile(zip_path) as z:
            members = [info for info in z.infolist() if not info.is_dir()]
            strip = _one_folder([info.filename for info in members])
            for info in members:
                name = info.filename[len(strip):]
                rel = c.rename.get(name) or name
                if rel == name and any(name.startswith(s) for s in c.skip):
                    continue
                path = PurePosixPath(rel)
                if path.is_absolute() or ".." in path.parts or not path.parts:
                    raise CurateError(f"{zip_path}: member {name!r} would be written outside {target}")
                out = staging.joinpath(*path.parts)
                out.parent.mkdir(parents=True, exist_ok=True)
                data = z.read(info)
                if out.suffix == ".tsv":  # one line ending, whatever the publisher's machine wrote
                    data = data.replace(b"\r\n", b"\n")
                out.write_bytes(data)
                written.append(rel)
        missing = [f for f in ("corpus.jsonl", "queries.jsonl") if f not in written]
        if missing or not any(f.startswith("qrels/") for f in written):
            raise CurateError(f"{zip_path}: not a BEIR collection (no {', '.join(missing) or 'qrels/'} in it)")
        (staging / DONE).write_text(json.dumps({"collection": c.name, "url": c.url, "sha256": c.sha256,
                                                "md5": c.md5, "files": sorted(written)}, indent=1), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.replace(target)
    except zipfile.BadZipFile as e:
        raise CurateError(f"{zip_path}: not a zip file ({e})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _one_folder(names: list[str]) -> str:
    """``"scifact/"`` when every member sits in that one folder (and it is not the BEIR layout's own)."""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names) and not tops & {"qrels", "corpus"}:
        return tops.pop() + "/"
    return ""


def _by_hand(c: Collection, data_dir: Path) -> str:
    return (f"Without network, download it elsewhere and place it at {data_dir / (c.name + '.zip')}, then run "
            f"the same command (it checks and unpacks it), or put a BEIR folder at {data_dir / c.name}")
