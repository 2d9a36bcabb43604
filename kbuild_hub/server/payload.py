"""The `commit` endpoint's NDJSON body, read as a stream.

huggingface_hub sends each regular file inline, base64 in a JSON line
(`{"key": "file", "value": {"content": "<base64>", "path": …, "encoding": "base64"}}`). A long
line's `content` is decoded chunk by chunk straight into a file, so a 1 GB upload costs a few MB
of memory instead of several copies of the line, and a file over the size limit is refused as
soon as it crosses the limit.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from kbuild_hub.errors import HubError, TooLarge
from kbuild_hub.gitstore import FileAdd

WINDOW = 64 << 10  # a line longer than this has its content streamed
CHUNK = 4 << 20
IN_MEMORY_MAX = 1 << 20  # decoded files up to this stay in memory
LINE_MAX = 16 << 20  # a line whose content is not near its start is read whole: this much at most
_MARKERS = (b'"content": "', b'"content":"')


@dataclass
class Operations:
    summary: str = ""
    description: str = ""
    parent: str | None = None
    add: dict[str, FileAdd] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    delete_dirs: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        text = self.summary or "Upload with huggingface_hub"
        return f"{text}\n\n{self.description}" if self.description else text


def parse_commit(stream: BinaryIO, validate_path: Callable[[str], str], max_size: int | None,
                 tmp: Path) -> Operations:
    """A `header` line, then `file` / `deletedFile` / `deletedFolder` lines."""
    ops, seen_header, number = Operations(), False, 0
    while (line := _read_line(stream, number := number + 1, max_size, tmp / f"file-{number}")) is not None:
        item, streamed = line
        if item is None:
            continue
        key, value = item["key"], item["value"]
        if not seen_header:
            if key != "header":
                raise HubError("commit payload: the first line must be the header")
            seen_header = True
            ops.summary = _text(value, "summary") or "Upload with huggingface_hub"
            ops.description, ops.parent = _text(value, "description"), _text(value, "parentCommit") or None
        elif key == "file":
            path = validate_path(value.get("path"))
            if value.get("encoding", "base64") != "base64":
                raise HubError(f"{path}: encoding {value.get('encoding')!r} is not supported (send base64)")
            ops.add[path] = FileAdd(path, streamed if streamed is not None else _decode_inline(value, path, max_size))
        elif key == "deletedFile":
            ops.delete.append(validate_path(value.get("path")))
        elif key == "deletedFolder":
            ops.delete_dirs.append(validate_path(str(value.get("path", "")).rstrip("/")))
        elif key == "lfsFile":
            raise HubError(f"{value.get('path')}: this hub takes no LFS uploads (preupload answers 'regular' "
                           "for every file)", hint="send the file inline, as huggingface_hub does after preupload")
        else:
            raise HubError(f"commit payload, line {number}: unknown operation {key!r}")
    if not seen_header:
        raise HubError("commit payload is empty: expected a header line")
    return ops


def _text(value: dict, key: str) -> str:
    """A header field as text: a string without NUL (git refuses NUL in a message), or absent."""
    text = value.get(key)
    if text is None:
        return ""
    if not isinstance(text, str) or "\0" in text:
        raise HubError(f"commit payload: header {key!r} must be text without NUL characters")
    return text


def _read_line(stream: BinaryIO, number: int, max_size: int | None, spill: Path):
    """(item, streamed source or None); (None, None) for a blank line; None at the end."""
    head = stream.readline(WINDOW)
    if not head:
        return None
    streamed = None
    if not head.endswith(b"\n") and len(head) == WINDOW:
        at, marker = next(((head.find(m), m) for m in _MARKERS if m in head), (-1, b""))
        if at < 0:  # content is not near the start: read the line whole, up to a bound
            head += stream.readline(LINE_MAX)
            if not head.endswith(b"\n") and len(head) > LINE_MAX:
                raise TooLarge(f"commit payload, line {number}: over {LINE_MAX} bytes before its \"content\"")
        else:
            with _Base64Sink(spill, max_size, number) as sink:
                rest = sink.feed_until_quote(head[at + len(marker):], stream)
                head, streamed = head[:at] + marker + b'"' + rest, sink.finish()
    if not head.strip():
        return None, None
    try:
        item = json.loads(head)
        item["key"], item["value"]  # noqa: B018 - both must be there
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nesting too deep
        raise HubError(f"commit payload, line {number}: expected {{\"key\": …, \"value\": {{…}}}}") from None
    if not isinstance(item["value"], dict):
        raise HubError(f"commit payload, line {number}: \"value\" must be an object")
    return item, streamed


class _Base64Sink:
    """Decodes base64 text fed in pieces into memory, then into `spill` once it grows."""

    def __init__(self, spill: Path, max_size: int | None, number: int):
        self.spill, self.max_size, self.number = spill, max_size, number
        self.pending, self.size, self.memory = b"", 0, bytearray()
        self.file: BinaryIO | None = None  # the spill, once the content outgrows memory

    def __enter__(self) -> _Base64Sink:
        return self

    def __exit__(self, *exc) -> None:
        if self.file is not None:
            self.file.close()

    def feed_until_quote(self, text: bytes, stream: BinaryIO) -> bytes:
        """Feed `text`, then the stream, up to the closing quote; return what follows it on the line."""
        while True:
            quote = text.find(b'"')
            if quote >= 0:
                self._feed(text[:quote])
                rest = text[quote + 1:]
                return rest if rest.endswith(b"\n") else rest + stream.readline()
            self._feed(text)
            text = stream.readline(CHUNK)
            if not text or text.endswith(b"\n") and b'"' not in text:
                raise HubError(f"commit payload, line {self.number}: unterminated content string")

    def _feed(self, text: bytes) -> None:
        if b"\\" in text:  # json.dumps never escapes base64 characters; refuse rather than guess
            raise HubError(f"commit payload, line {self.number}: escaped characters in base64 content")
        text = self.pending + text
        whole = len(text) - len(text) % 4
        self.pending = text[whole:]
        try:
            data = base64.b64decode(text[:whole], validate=True)
        except (binascii.Error, ValueError):
            raise HubError(f"commit payload, line {self.number}: content is not valid base64") from None
        self._write(data)

    def _write(self, data: bytes) -> None:
        self.size += len(data)
        if self.max_size is not None and self.size > self.max_size:
            raise TooLarge(f"a file in the commit (line {self.number}) is over this hub's limit of "
                           f"{self.max_size} bytes", hint="raise it with `kbuild hub serve --max-file-size`")
        if self.file is None and len(self.memory) + len(data) <= IN_MEMORY_MAX:
            self.memory += data
            return
        if self.file is None:
            self.file = open(self.spill, "wb")
            self.file.write(self.memory)
            self.memory = bytearray()
        self.file.write(data)

    def finish(self) -> bytes | Path:
        if self.pending:
            raise HubError(f"commit payload, line {self.number}: content is not valid base64 (bad length)")
        if self.file is None:
            return bytes(self.memory)
        self.file.close()
        self.file = None
        return self.spill


def _decode_inline(value: dict, path: str, max_size: int | None) -> bytes:
    if value.get("encoding", "base64") != "base64":
        raise HubError(f"{path}: encoding {value.get('encoding')!r} is not supported (send base64)")
    content = value.get("content")
    if not isinstance(content, str):
        raise HubError(f"{path}: the file line has no content")
    try:
        data = base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise HubError(f"{path}: content is not valid base64") from None
    if max_size is not None and len(data) > max_size:
        raise TooLarge(f"{path} is {len(data)} bytes; this hub accepts files up to {max_size} bytes",
                       hint="raise it with `kbuild hub serve --max-file-size`")
    return data
