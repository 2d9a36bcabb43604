"""`kbuild update-build`: rewrite an edition 4 or 5 build.toml as edition 6, in place, keeping its
comments, key order and formatting: only what changes is touched.

What changes (builder/project/editions/ reads each edition):
- edition 4 has no `edition` key: `edition = 6` is added as the last key of `[general]` (tomlkit has
  no public insert at a position, and its private one changed between releases); edition 5's
  `edition = 5` becomes 6 where it is;
- edition 4 spelled a Python-only kernel `universal = true`: it becomes a `[torch-noarch]` table;
- each `[kernel.X] backend = "cuda"` becomes `language = "cpp-cuda"` on its own line, and
  `[torch-noarch]`'s `cuda-capabilities` / `rocm-archs` take the parser's underscores. tomlkit cannot
  rename a key in place, so these are rewritten on their lines (found by toml_lines), and only when
  the line is the plain `key = value` kbuild expects; anything else is refused, nothing written.

Then the new text is read back and must give the same kernel as the old one did (the same model but
for its edition, so the same variants are planned), or nothing is written. The file is replaced
atomically.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from builder._toml import tomllib
from builder.project.editions import CURRENT_EDITION, edition_of
from builder.project.editions.v6 import LANGUAGES
from builder.project.manifest import parse_manifest
from builder.project.model import Where
from builder.project.toml_lines import key_lines
from kbuild_common.errors import KbuildError, ManifestError

# what edition 6 spells otherwise, renamed on the key's own line: (table..., old key) -> new key
_NOARCH_RENAMES = {"cuda-capabilities": "cuda_capabilities", "rocm-archs": "rocm_archs"}


@dataclass(frozen=True)
class Upgrade:
    path: Path
    edition: int  # what the file is now
    text: str | None  # the rewritten file; None when it is current
    changes: tuple[str, ...] = ()

    @property
    def due(self) -> bool:
        return self.text is not None


def plan_upgrade(path: Path) -> Upgrade:
    """What `kbuild update-build` would write for the build.toml at `path` (checked: the result
    reads as the same kernel)."""
    with open(path, encoding="utf-8", newline="") as f:  # as written: CRLF line ends stay CRLF
        text = f.read()
    old = parse_manifest(path, text, notify=False)  # every error of the old file, as kbuild check says it
    edition = edition_of(tomllib.loads(text))
    assert edition is not None  # None is an `edition` that is no integer: parse_manifest refused it above
    if edition == CURRENT_EDITION:
        return Upgrade(path, edition, None)
    changes: list[str] = []
    text = _rename_keys(path, text, changes)
    doc = tomlkit.parse(text)
    general = doc["general"]
    if "edition" in general:
        general["edition"] = CURRENT_EDITION  # in place: its comment and position stay
    else:
        general.add("edition", CURRENT_EDITION)  # after [general]'s last key, before its sub-tables
    changes.insert(0, f"[general] edition = {CURRENT_EDITION}")
    if "universal" in general:
        universal = bool(general["universal"])
        general.remove("universal")
        if universal:
            doc.add("torch-noarch", tomlkit.table())
            changes.append("[general] universal = true -> [torch-noarch]")
        else:
            changes.append("[general] universal = false removed (edition 6 has no such key)")
    new_text = tomlkit.dumps(doc)
    if "\r\n" in text:  # what tomlkit adds ends in \n: the file's own line ends for every line
        new_text = new_text.replace("\r\n", "\n").replace("\n", "\r\n")
    try:
        new = parse_manifest(path, new_text)
    except (ManifestError, TOMLKitError) as e:
        raise KbuildError(f"{path}: the rewritten build.toml does not read ({e}); nothing written") from None
    if replace(new, path=old.path, edition=old.edition) != old:
        raise KbuildError(f"{path}: the rewritten build.toml would describe another kernel than this one; "
                          "nothing written (please report this)")
    return Upgrade(path, edition, new_text, tuple(changes))


def _rename_keys(path: Path, text: str, changes: list[str]) -> str:
    """`backend = "x"` -> `language = "cpp-x"` in each kernel section, and [torch-noarch]'s dashed
    keys -> underscores, each on its own line."""
    data, lines = tomllib.loads(text), key_lines(text)
    out = text.splitlines(keepends=True)
    kernels = data.get("kernel", {})
    for name, body in kernels.items():
        backend = body.get("backend")
        language = f"cpp-{backend}"
        if language not in LANGUAGES:
            raise KbuildError(f"{_at(path, lines, ('kernel', name, 'backend'))}: edition 6 has no language for "
                              f'{backend} kernels (it has {", ".join(LANGUAGES)}); nothing written')
        quoted = f'"{language}"'
        _rename(path, out, lines, ("kernel", name), "backend", "language",
                lambda value, quoted=quoted, backend=backend: quoted if value.strip("\"'") == backend else None)
        changes.append(f'[kernel.{name}] backend = "{backend}" -> language = "{language}"')
    for old, new in _NOARCH_RENAMES.items():
        if old in data.get("torch-noarch", {}):
            _rename(path, out, lines, ("torch-noarch",), old, new, lambda value: value)
            changes.append(f"[torch-noarch] {old} -> {new}")
    return "".join(out)


_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_-]+)(?P<eq>\s*=\s*)(?P<value>\"[^\"]*\"|'[^']*'|\[.*)$",
                   re.DOTALL)


def _rename(path: Path, out: list[str], lines: dict, table: tuple[str, ...], key: str, new_key: str, value_of) -> None:
    """Rename `key` of `table` on its line (and rewrite its value with `value_of`), or refuse."""
    number = lines.get(table + (key,))
    header = lines.get(table)
    line = out[number - 1] if number else ""
    body, newline = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")):]
    m = _LINE.match(body.split(" #", 1)[0].rstrip()) if number and number != header else None
    value = value_of(m["value"]) if m and m["key"] == key else None
    if not number or m is None or value is None:  # no line, or not one `key = value` line: m and value are None
        raise KbuildError(f"{_at(path, lines, table + (key,))}: kbuild update-build rewrites `{key} = …` only as "
                          f"a line of its own under its table's header; write `{new_key}` there by hand "
                          "(nothing written)")
    out[number - 1] = f"{m['indent']}{new_key}{m['eq']}{value}{body[m.end('value'):]}{newline}"


def _at(path: Path, lines: dict, keys: tuple[str, ...]) -> str:
    return Where(path, lines).at(keys)  # `file:line: [table] key`, as kbuild check names it


def write_upgrade(upgrade: Upgrade) -> None:
    """Replace the file with the upgraded text: a temporary file beside it, renamed over it."""
    assert upgrade.text is not None, "only an upgrade that is due has a text to write (Upgrade.due)"
    fd, tmp = tempfile.mkstemp(prefix=".build.toml.", dir=upgrade.path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(upgrade.text)
        os.chmod(tmp, upgrade.path.stat().st_mode & 0o777)
        os.replace(tmp, upgrade.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
