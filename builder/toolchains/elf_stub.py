"""Link-time stand-ins for shared libraries: a stub keeps a real library's soname and those of its
versioned symbols a filter allows (e.g. the GLIBCXX versions a manylinux policy allows), with no
code behind them. Linking against the stub binds references to those versions only; whatever else
is needed must come from somewhere else (a static archive) or the link says so.

This is how manylinux toolchains build against an old libstdc++ with a newer compiler (Red Hat's
devtoolset links libstdc++.so.6 of the system plus a `libstdc++_nonshared.a`); zig makes its glibc
stubs the same way, from symbol lists.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from builder.toolchains.binary import UnreadableLibrary, gnu_versions
from builder.toolchains.binary.gnu_versions import Export
from kbuild_common import proc
from kbuild_common.errors import ToolchainError


def exports(path: Path) -> tuple[str, list[Export]]:
    """The soname and the versioned symbols `path` defines (gnu_versions.py reads them); a file
    that is no readable library, or defines no symbol versions, is a toolchain error."""
    try:
        found = gnu_versions.exports(path)
    except UnreadableLibrary as e:
        raise ToolchainError(str(e)) from None
    if found is None:
        raise ToolchainError(f"{path}: defines no symbol versions; nothing to make a versioned stub of")
    return found


def write_stub(real: Path, dest: Path, keep: Callable[[str], bool], cc: str = "gcc") -> int:
    """Write at `dest` a stub of the shared library `real` with only the symbols whose version
    `keep` accepts; returns how many it kept. Each keeps its kind, size and default-ness."""
    soname, symbols = exports(real)
    kept = [s for s in symbols if keep(s.version)]
    versions = sorted({s.version for s in kept})
    with tempfile.TemporaryDirectory(prefix="kbuild-stub-") as tmp:
        asm, script = Path(tmp) / "stub.s", Path(tmp) / "stub.map"
        asm.write_text(_assembly(kept))
        script.write_text("".join(f"{v} {{ }};\n" for v in versions) + "LOCAL_STUB { local: *; };\n")
        cmd = [cc, "-shared", "-nostdlib", "-o", str(dest), str(asm), f"-Wl,-soname,{soname}",
               f"-Wl,--version-script,{script}"]
        done = proc.run(cmd, check=False, what=f"{cc} (a link stub)")
        if done.returncode:
            raise ToolchainError(f"making a stub of {real} failed: {done.stdout.strip().splitlines()[-1:]}")
    return len(kept)


def _assembly(symbols: list[Export]) -> str:
    lines = []
    for i, s in enumerate(symbols):
        label = f"kbuild_stub_{i}"
        size = max(s.size, 1)
        if s.kind == "func":
            lines += [".text", f".type {label},@function"]
        elif s.kind == "tls":
            lines += ['.section .tbss,"awT",@nobits', f".type {label},@tls_object", f".size {label},{size}"]
        else:
            lines += [".data", f".type {label},@object", f".size {label},{size}"]
        lines += [f"{'.weak' if s.weak else '.globl'} {label}", f"{label}:",
                  "ret" if s.kind == "func" else f".zero {size}",
                  f".symver {label},{s.name}{'@@' if s.default else '@'}{s.version}"]
    return "\n".join(lines) + "\n"
