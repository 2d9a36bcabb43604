"""A package index, as a client reads it: a project's releases and files through the PEP 691 JSON
simple API, and a wheel's core metadata, from the file PEP 658 serves beside it when the index
says it has one, else from the wheel itself with HTTP range requests (its zip directory and its
METADATA member: a few hundred kB of a 500 MB torch wheel, as pip's lazy wheels read it).

Only `kbuild toolchain check-index` uses it; no build touches the network for the versions table.
Every request goes through one `Transport` (url, headers) -> (status, headers, body), so tests
replay a recorded answer and the code above it is the same.
"""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import HeaderParser
from urllib.parse import urljoin

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from kbuild_common.errors import UsageError

JSON_SIMPLE = "application/vnd.pypi.simple.v1+json"
TIMEOUT = 60  # seconds for one request
Transport = Callable[[str, dict], "tuple[int, dict, bytes]"]


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    version: Version
    tags: frozenset[str]  # the wheel's tags as text: "cp311-cp311-manylinux_2_28_x86_64"
    size: int | None
    has_metadata: bool  # PEP 658/714: the index serves <url>.metadata


def urllib_transport(url: str, headers: dict) -> tuple[int, dict, bytes]:
    """The network, through urllib (its proxy and certificate settings are the environment's)."""
    request = urllib.request.Request(url, headers={"User-Agent": "kbuild", **headers})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, b""
    except (urllib.error.URLError, OSError) as e:
        raise UsageError(f"{url}: cannot reach it ({getattr(e, 'reason', e)})") from None


class PackageIndex:
    def __init__(self, url: str, transport: Transport = urllib_transport):
        self.url = url.rstrip("/") + "/"
        self.get = transport

    def files(self, project: str) -> list[IndexFile]:
        """The project's wheels (not yanked) with their versions, as the index lists them."""
        page = urljoin(self.url, canonicalize_name(project) + "/")
        status, headers, body = self.get(page, {"Accept": JSON_SIMPLE})
        if status != 200:
            raise UsageError(f"{page}: the index answered HTTP {status} (expected the project's page)")
        if not headers.get("content-type", "").startswith(JSON_SIMPLE):
            raise UsageError(f"{page}: the index did not answer in PEP 691 JSON (content-type "
                             f"{headers.get('content-type', 'none')!r}); name one that does with --index")
        try:
            listing = json.loads(body)["files"]
        except (ValueError, KeyError, TypeError):
            raise UsageError(f"{page}: not a PEP 691 project page (no files list)") from None
        out = []
        for entry in listing:
            try:
                _, version, _, tags = parse_wheel_filename(entry["filename"])
            except (InvalidWheelFilename, InvalidVersion, KeyError):
                continue  # an sdist, or a name pip would not install either
            if entry.get("yanked"):
                continue
            meta = entry.get("core-metadata", entry.get("data-dist-info-metadata"))
            out.append(IndexFile(entry["filename"], urljoin(page, entry["url"]), version,
                                 frozenset(str(t) for t in tags), entry.get("size"), bool(meta)))
        return out

    def metadata(self, wheel: IndexFile) -> str:
        """The wheel's METADATA text: PEP 658's file when the index has one, else read from the wheel
        by range requests."""
        if wheel.has_metadata:
            status, _, body = self.get(wheel.url.split("#")[0] + ".metadata", {})
            if status == 200:
                return body.decode("utf-8")
        return _metadata_from_zip(_RangeFile(self.get, wheel.url.split("#")[0], wheel.size), wheel.filename)


def requires_dist(metadata_text: str) -> list[str]:
    return HeaderParser().parsestr(metadata_text).get_all("Requires-Dist") or []


def _metadata_from_zip(raw: _RangeFile, filename: str) -> str:
    try:
        archive = zipfile.ZipFile(io.BufferedReader(raw, buffer_size=1 << 18))
        name = next(n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode("utf-8")
    except (zipfile.BadZipFile, StopIteration, UnicodeDecodeError) as e:
        raise UsageError(f"{filename}: no readable .dist-info/METADATA in the wheel ({e or 'none'})") from None


class _RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, for zipfile (which seeks to the end first)."""

    def __init__(self, get: Transport, url: str, size: int | None):
        self.get, self.url, self.pos = get, url, 0
        self.size = size if size is not None else self._size()

    def _size(self) -> int:
        status, headers, _ = self.get(self.url, {"Range": "bytes=0-0"})
        total = headers.get("content-range", "").rpartition("/")[2]
        if status != 206 or not total.isdigit():
            raise UsageError(f"{self.url}: the index does not serve byte ranges (HTTP {status}); its wheels' "
                             "metadata cannot be read without downloading them")
        return int(total)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: offset, 1: self.pos + offset, 2: self.size + offset}[whence]
        return self.pos

    def readinto(self, buffer) -> int:
        count = min(len(buffer), self.size - self.pos)
        if count <= 0:
            return 0
        status, _, body = self.get(self.url, {"Range": f"bytes={self.pos}-{self.pos + count - 1}"})
        if status != 206:
            raise UsageError(f"{self.url}: the index does not serve byte ranges (HTTP {status}); its wheels' "
                             "metadata cannot be read without downloading them")
        buffer[:len(body)] = body
        self.pos += len(body)
        return len(body)
