"""Line numbers for TOML keys, so manifest errors can say `build.toml:14`.

tomllib gives values but no positions; this scan maps each table header and `key =` line to
its key path. It only needs to be right for the files tomllib already accepted.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_PART = r"(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)"  # a bare or quoted key
_KEY = re.compile(rf"^\s*({_KEY_PART}(?:\s*\.\s*{_KEY_PART})*)\s*=")
_STRING = re.compile(r"\"(?:\\.|[^\"\\])*\"|'[^']*'")


def _split_dotted(key: str) -> tuple[str, ...]:
    parts = re.findall(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_\-]+)", key)
    return tuple(a or b or c for a, b, c in parts)


def _define(lines: dict, table: tuple[str, ...], key: tuple[str, ...], number: int) -> None:
    """`[a.b.c]` (or `a.b.c = …`) defines a, a.b and a.b.c where it is first written: an error
    about the table `a` of `[kernal.relu]` must point at that header too."""
    for n in range(1, len(key) + 1):
        lines.setdefault(table + key[:n], number)


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """Map ('kernel', 'x', 'src') -> 1-based line of its definition (tables map to their header,
    a table only ever named as a prefix to the first header or key that names it)."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    depth = 0  # open brackets of a multi-line array value
    in_multiline_string = False
    for number, raw in enumerate(text.splitlines(), start=1):
        if in_multiline_string:
            if raw.count('"""') % 2 == 1 or raw.count("'''") % 2 == 1:
                in_multiline_string = False
            continue
        code = _STRING.sub('""', raw).split("#", 1)[0]
        if depth == 0:
            if m := _HEADER.match(raw):
                table = _split_dotted(m.group(1))
                _define(lines, (), table, number)
                continue
            if m := _KEY.match(raw):
                _define(lines, table, _split_dotted(m.group(1)), number)
                value = raw[m.end():]
                if value.count('"""') % 2 == 1 or value.count("'''") % 2 == 1:
                    in_multiline_string = True
                    continue
                code = _STRING.sub('""', value).split("#", 1)[0]
        depth = max(0, depth + code.count("[") - code.count("]"))
    return lines
