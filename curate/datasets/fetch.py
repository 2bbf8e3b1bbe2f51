"""``curate data get``: the public retrieval collections the docs use, fetched into a BEIR folder.

A collection is one zip at a public address with a known checksum. It is downloaded to
``DIR/NAME.zip.part`` (a second run asks the server for the rest only, HTTP ``Range``), checked
against its checksum before anything is unpacked, and unpacked into ``DIR/NAME`` (``corpus.jsonl``,
``queries.jsonl``, ``qrels/SPLIT.tsv``) through a staging folder, so the folder either holds the
whole collection or nothing. A zip placed by hand at ``DIR/NAME.zip`` (a machine without network)
is used as it is, after the same check. Licences stay the publishers': the collections are for
research use and are never copied into curate.

Only what curate made is ever removed: ``DIR/NAME`` must not exist yet (or be a finished folder of
curate's, marked by ``.curate-data.json``), and a staging folder is removed only when it carries
curate's own mark. A URL's credentials (a password, a signed query) are masked as ``***`` in every
line shown and in the folder's record, as every other command does.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import shutil
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit, urlunsplit

from curate.core.errors import CurateError
from curate.core.secrets import safe_url
from curate.llm.redact import Scrubber

try:
    from lzma import LZMAError
except ImportError:  # pragma: no cover - a Python built without lzma cannot read such members anyway
    LZMAError = zipfile.BadZipFile

BEIR = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
COCKTAIL = "https://github.com/KID-22/Cocktail/raw/d070bccd55e643c8c9d018ef65e5825099e97550/dataset"
CHUNK = 1 << 16
DONE = ".curate-data.json"  # written last into a finished folder: what was unpacked, from what
STAGING_MARK = ".curate-staging"  # inside a staging folder from its first moment: curate's to remove
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # one folder name, never a path
MAX_MEMBER = 64 << 30  # bytes one member may unpack to: well above the largest BEIR file, far below a zip bomb
MAX_MEMBER_ENV = "CURATE_DATA_MAX_MEMBER"  # overrides MAX_MEMBER (a number of bytes)
READABLE = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, LZMAError)  # what a broken member raises when read


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
    check_name(name)
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


def check_name(name: str) -> None:
    """NAME becomes the folder DIR/NAME: a path here (``.``, ``../x``, ``/home``) would aim the
    unpacking, and any clean-up, at a folder that is not the collection's."""
    if not NAME.match(name):
        raise CurateError(f"{name!r} is not a collection name: a NAME is letters, digits, '.', '_' and '-', "
                          "starting with a letter or digit (it names the folder DIR/NAME), never a path")


def get(c: Collection, data_dir: Path) -> tuple[Path, str]:
    """Fetch and unpack ``c`` into ``data_dir / c.name``; (the folder, what was done). Any
    secret of ``c.url`` that an error message picked up (a server's text, a reason) is masked."""
    scrub = Scrubber.for_config(None, [c.url])
    try:
        return _get(c, data_dir)
    except CurateError as e:
        raise CurateError(scrub(str(e))) from None


def _get(c: Collection, data_dir: Path) -> tuple[Path, str]:
    check_name(c.name)
    target = data_dir / c.name
    there = _already_there(c, target)
    if there:
        return target, there
    data_dir.mkdir(parents=True, exist_ok=True)
    placed = data_dir / f"{c.name}.zip"
    if placed.exists():
        sums = _verify(c, placed, placed_by_hand=True)
        zip_path, how = placed, f"unpacked {placed}"
    else:
        zip_path, sums = _download(c, data_dir)
        how = f"downloaded {safe_url(c.url)}"
    _unpack(c, zip_path, target, sums)
    if how.startswith("downloaded"):  # a zip placed by hand is the user's: it stays
        zip_path.unlink()
    return target, how


def _already_there(c: Collection, target: Path) -> str | None:
    """What to say when ``target`` already holds the collection; None when it is free. Anything
    else at that path is someone's own and is refused, never replaced."""
    if (target / DONE).is_file():
        _same_checksum(c, target)
        return "already there"
    if (target / "corpus.jsonl").exists() and (target / "queries.jsonl").exists():
        return "already there (placed by hand)"
    if os.path.lexists(target):
        raise CurateError(_not_ours(target))
    return None


def _same_checksum(c: Collection, target: Path) -> None:
    """A finished folder made from another zip (another ``--sha256``) is not this collection."""
    try:
        record = json.loads((target / DONE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict):
        return
    for kind, label, want in (("sha256", "SHA-256", c.sha256), ("md5", "MD5", c.md5)):
        held = record.get(kind)
        if want and isinstance(held, str) and held.lower() != want.lower():
            raise CurateError(f"{target} already holds a collection from another zip ({label} {held}, not {want}); "
                              "remove that folder to fetch this one, or give another --dir")


def _not_ours(path: Path) -> str:
    return (f"{path} exists and is not curate's (no {DONE} in it): curate does not replace it; "
            "move it away or give another --dir")


def _download(c: Collection, data_dir: Path) -> tuple[Path, dict[str, str]]:
    part = data_dir / f"{c.name}.zip.part"
    have = part.stat().st_size if part.exists() else 0
    shown = safe_url(c.url)
    try:
        url, auth = _credentials_apart(c.url)
        request = urllib.request.Request(url, headers={"User-Agent": "curate", **auth,
                                                       **({"Range": f"bytes={have}-"} if have else {})})
        response = urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as e:
        if e.code == 416 and have:  # the part is already whole
            return _finish(c, part)
        raise CurateError(f"{shown}: the server answered {e.code} {e.reason}. {_by_hand(c, data_dir)}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", e)
        raise CurateError(f"cannot reach {shown} ({reason}). {_by_hand(c, data_dir)}") from None
    except ValueError as e:  # not a URL urllib can fetch (a scheme it lacks, a bad port)
        raise CurateError(f"cannot fetch {shown}: {e}") from None
    with response:
        resumed = have and response.status == 206
        if not resumed:
            have = 0  # the server sent the whole file: start the part again
        total = _length(response, shown) + have
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
                raise CurateError(f"{shown}: the download broke off after {got:,} of {total:,} bytes ({e!r}); "
                                  f"run the same command again to fetch the rest ({part} keeps what came)") from None
    return _finish(c, part)


def _credentials_apart(url: str) -> tuple[str, dict[str, str]]:
    """The URL without ``user:password@`` and the basic-auth header that carries them instead:
    urllib would take them for part of the host name."""
    parts = urlsplit(url)
    if not (parts.username or parts.password):
        return url, {}
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return (urlunsplit(parts._replace(netloc=netloc)),
            {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()})


def _length(response, shown: str) -> int:
    """The body's length the server announced (0: none); a value that is no length is refused
    before anything is written."""
    raw = response.headers.get("Content-Length")
    if raw is None or not raw.strip():
        return 0
    try:
        length = int(raw)
    except ValueError:
        length = -1
    if length < 0:
        raise CurateError(f"{shown}: the server sent a Content-Length that is not a length ({raw!r}); "
                          "nothing was written")
    return length


def _finish(c: Collection, part: Path) -> tuple[Path, dict[str, str]]:
    sums = _verify(c, part)
    whole = part.with_suffix("")  # NAME.zip
    part.replace(whole)
    return whole, sums


def _verify(c: Collection, path: Path, placed_by_hand: bool = False) -> dict[str, str]:
    """Check ``path`` against the published checksum; its SHA-256 and MD5, for the record."""
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
                          + ("replace the file with the one from " + safe_url(c.url) if placed_by_hand
                             else "the file was removed: run the same command again"))
    return {"sha256": sha.hexdigest(), "md5": md5.hexdigest()}


def _unpack(c: Collection, zip_path: Path, target: Path, sums: dict[str, str]) -> None:
    """Unpack into a staging folder of curate's own, then put it in place in one rename; on any
    failure the staging folder goes and ``target`` stays as it was."""
    staging = _staging(target)
    try:
        try:
            with zipfile.ZipFile(zip_path) as z:
                plan = _plan(c, z, zip_path, target)
                limit = _member_limit()
                for info, rel in plan:
                    _extract(z, info, staging.joinpath(*rel.split("/")), limit, zip_path)
        except zipfile.BadZipFile as e:
            raise CurateError(f"{zip_path}: not a zip file ({e})") from None
        written = [rel for _, rel in plan]
        missing = [f for f in ("corpus.jsonl", "queries.jsonl") if f not in written]
        if missing or not any(f.startswith("qrels/") for f in written):
            raise CurateError(f"{zip_path}: not a BEIR collection (no {', '.join(missing) or 'qrels/'} in it)")
        (staging / DONE).write_text(json.dumps({"collection": c.name, "url": safe_url(c.url), **sums,
                                                "files": sorted(written)}, indent=1), encoding="utf-8")
        if os.path.lexists(target):  # it appeared while this ran: still not ours to replace
            raise CurateError(_not_ours(target))
        staging.replace(target)
        (target / STAGING_MARK).unlink()
    finally:
        if (staging / STAGING_MARK).is_file():
            shutil.rmtree(staging, ignore_errors=True)


def _staging(target: Path) -> Path:
    """A fresh staging folder beside ``target``, marked as curate's from the start; one left by
    an interrupted run is removed only if it carries that mark."""
    staging = target.with_name(f".{target.name}.unpacking")
    if os.path.lexists(staging):
        if staging.is_symlink() or not (staging / STAGING_MARK).is_file():
            raise CurateError(f"{staging} exists and is not curate's staging folder: curate does not remove it; "
                              "move it away or give another --dir")
        shutil.rmtree(staging)
    staging.mkdir()
    (staging / STAGING_MARK).touch()
    return staging


def _plan(c: Collection, z: zipfile.ZipFile, zip_path: Path, target: Path) -> list[tuple[zipfile.ZipInfo, str]]:
    """The members to unpack and where each goes (a path inside the folder), checked before a
    byte is written: each path once, inside the folder, readable, and no file where a folder is."""
    members = [info for info in z.infolist() if not info.is_dir()]
    strip = _one_folder([info.filename for info in members])
    plan, seen = [], {}
    for info in members:
        name = info.filename[len(strip):]
        rel = c.rename.get(name) or name
        if rel == name and any(name.startswith(s) for s in c.skip):
            continue
        path = PurePosixPath(rel)
        if path.is_absolute() or ".." in path.parts or not path.parts:
            raise CurateError(f"{zip_path}: member {name!r} would be written outside {target}")
        key = path.as_posix()
        if key in seen:
            raise CurateError(f"{zip_path}: member {info.filename!r} is in the zip twice (as {key}); "
                              "curate does not pick one of them")
        if key in (DONE, STAGING_MARK):
            raise CurateError(f"{zip_path}: member {info.filename!r} has a name curate keeps for its own record")
        _readable(info, zip_path)
        seen[key] = info.filename
        plan.append((info, key))
    _no_file_is_a_folder(seen, zip_path)
    return plan


def _readable(info: zipfile.ZipInfo, zip_path: Path) -> None:
    if info.flag_bits & 0x1:
        raise CurateError(f"{zip_path}: member {info.filename!r} is encrypted; curate unpacks zips without a password")
    if info.compress_type not in READABLE:
        raise CurateError(f"{zip_path}: member {info.filename!r} uses compression method {info.compress_type}, "
                          "which curate cannot unpack (stored, deflate, bzip2 or lzma only)")


def _no_file_is_a_folder(seen: dict[str, str], zip_path: Path) -> None:
    """``a/b`` and ``a/b/c`` cannot both be written: ``a/b`` would be a file and a folder."""
    folders = {str(parent) for key in seen for parent in PurePosixPath(key).parents}
    for key, member in seen.items():
        if key in folders:
            raise CurateError(f"{zip_path}: member {member!r} is a file, yet other members sit inside it as a folder")


def _member_limit() -> int:
    raw = os.environ.get(MAX_MEMBER_ENV)
    if not raw:
        return MAX_MEMBER
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if limit <= 0:
        raise CurateError(f"{MAX_MEMBER_ENV}={raw!r} is not a number of bytes")
    return limit


class _TooBig(Exception):
    """A member unpacks past the limit."""


def _extract(z: zipfile.ZipFile, info: zipfile.ZipInfo, out: Path, limit: int, zip_path: Path) -> None:
    """One member to ``out``, streamed in chunks: a huge member never sits in memory whole."""
    member = f"{zip_path}: member {info.filename!r}"
    try:
        if info.file_size > limit:
            raise _TooBig
        out.parent.mkdir(parents=True, exist_ok=True)
        with z.open(info) as src, out.open("wb") as dst:
            _copy(src, dst, limit, crlf=out.suffix == ".tsv")
    except _TooBig:
        raise CurateError(f"{member} unpacks to more than {limit:,} bytes, the limit for one file "
                          f"(${MAX_MEMBER_ENV} sets another)") from None
    except DAMAGED as e:
        raise CurateError(f"{member} is damaged ({e}); fetch the zip again or from another source") from None
    except (NotImplementedError, RuntimeError) as e:  # a method or an encryption zipfile lacks
        raise CurateError(f"{member} cannot be unpacked ({e})") from None
    except OSError as e:
        raise CurateError(f"{member} could not be unpacked ({e})") from None


def _copy(src, dst, limit: int, crlf: bool) -> None:
    """Copy in chunks up to ``limit`` bytes; ``crlf``: CRLF becomes LF (one line ending, whatever
    the publisher's machine wrote), a CR at a chunk's end held until the next chunk shows what follows."""
    size, held = 0, b""
    while chunk := src.read(CHUNK):
        size += len(chunk)
        if size > limit:
            raise _TooBig
        if crlf:
            chunk = held + chunk
            held = b"\r" if chunk.endswith(b"\r") else b""
            chunk = chunk[:len(chunk) - len(held)].replace(b"\r\n", b"\n")
        dst.write(chunk)
    dst.write(held)


def _one_folder(names: list[str]) -> str:
    """``"scifact/"`` when every member sits in that one folder (and it is not the BEIR layout's own)."""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) == 1 and all("/" in n for n in names) and not tops & {"qrels", "corpus"}:
        return tops.pop() + "/"
    return ""


def _by_hand(c: Collection, data_dir: Path) -> str:
    return (f"Without network, download it elsewhere and place it at {data_dir / (c.name + '.zip')}, then run "
            f"the same command (it checks and unpacks it), or put a BEIR folder at {data_dir / c.name}")
