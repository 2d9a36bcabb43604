"""A glibc sysroot so the host's gcc (and nvcc through it) builds libraries that load on an older
Linux: manylinux_2_28 means glibc 2.28 and the libstdc++ of gcc 8, whatever the build machine has.

Where each part comes from, and why:
- glibc's headers, link stubs (libc.so.6, libm.so.6, libpthread.so.0, libdl.so.2, ...),
  libc_nonshared.a and crt1.o: zig (PyPI `ziglang`). Zig carries every glibc release's symbol
  lists and its headers patched per release; cargo-zigbuild and maturin build manylinux wheels
  with it. Debian's archive here has no glibc older than 2.31 (bullseye); buster is gone.
- crti.o / crtn.o: the host's (the _init/_fini frames: no symbols, nothing versioned).
- libstdc++ and libgcc_s: stubs of the host compiler's own libraries that keep only the
  GLIBCXX / CXXABI / GCC versions the policy allows (builder/toolchains/elf_stub.py), followed at link time
  by the compiler's libstdc++.a for anything newer, kept private to the library. That is how
  manylinux toolchains (Red Hat's devtoolset, which torch's own wheels are built with) pair a
  new g++ with an old libstdc++.so.6.

The layout is a normal sysroot (usr/include, usr/lib/x86_64-linux-gnu) that `--sysroot` points
gcc at, plus kbuild/ holding the C++ runtime stubs that go first on the link's search path.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from builder.project.manylinux import policy_versions
from builder.toolchains import elf_stub
from builder.toolchains.binary import UnreadableLibrary
from builder.toolchains.binary.gnu_versions import unversioned_imports
from kbuild_common import proc
from kbuild_common.errors import CommandError, ToolchainError

# zig's libc header folders for x86_64 glibc, most specific first (its own search order)
_HEADER_DIRS = ("x86-linux-gnu", "generic-glibc", "x86-linux-any", "any-linux-any")
_GLIBC_LIBS = ("libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libutil.so.1",
               "libresolv.so.2")
_LIB = "usr/lib/x86_64-linux-gnu"
NONSHARED = "libstdc++_nonshared.a"
NEWER = "kbuild/newer-glibc-symbols.txt"  # what the host's glibc exports and the sysroot's does not
# under a kernel's generated include folder: a distribution Python's multiarch headers, mirrored
PYTHON_MULTIARCH = "python-multiarch"


@dataclass(frozen=True)
class Sysroot:
    root: Path
    glibc: str  # "2.28"

    @property
    def cxx_flags(self) -> tuple[str, ...]:
        return (f"--sysroot={self.root}",)

    @property
    def nvcc_flags(self) -> tuple[str, ...]:
        return ("-Xcompiler", f"--sysroot={self.root}")

    @property
    def link_flags(self) -> tuple[str, ...]:
        # The stubs first: -l:libstdc++.so.6 and the driver's libgcc_s bind to the policy's
        # versions; what only a newer libstdc++ has comes from the archive, hidden in the library.
        # gcc searches its own multiarch folder (the host's /usr/lib/x86_64-linux-gnu) before
        # the sysroot's: name the sysroot's first, for libraries (-L) and start files (-B).
        lib = self.root / _LIB
        return (f"--sysroot={self.root}", f"-B{lib}/", f"-L{self.root / 'kbuild'}", f"-L{lib}")

    @staticmethod
    def python_headers(multiarch_include: str, generated_include: Path) -> tuple[Path, Path] | None:
        """Where a distribution Python's multiarch headers go for a build under the sysroot: (the
        folder to search, the copy of `multiarch_include` in it), or None for a self-contained Python.
        Debian's /usr/include/python3.11/pyconfig.h includes <x86_64-linux-gnu/python3.11/pyconfig.h>,
        which `--sysroot` looks for in the sysroot's usr/include, not the host's; the host's
        /usr/include as a search folder would bring every header of the newer glibc back (what the
        sysroot removed, sys/single_threaded.h, would be found again), so only the Python's folder is
        copied, under the same relative path, into a folder of its own."""
        if not multiarch_include:
            return None
        source = Path(multiarch_include)
        folder = generated_include / PYTHON_MULTIARCH
        return folder, folder / source.parent.name / source.name

    def python_header_flags(self, multiarch_include: str, generated_include: Path) -> tuple[str, ...]:
        found = self.python_headers(multiarch_include, generated_include)
        return ("-isystem", str(found[0])) if found else ()

    def too_new(self, library: Path) -> list[str]:
        """The glibc functions `library` uses without a symbol version that the sysroot's glibc
        lacks: a header of a newer glibc declared them, the link stubs could not version them,
        and the older glibc would fail to load the library."""
        newer = set((self.root / NEWER).read_text().split())
        try:
            return sorted(newer & unversioned_imports(library))
        except UnreadableLibrary as e:
            raise ToolchainError(str(e)) from None

    @property
    def link_libraries(self) -> tuple[str, ...]:
        # After the objects: the archive for what the libstdc++ stub lacks, and glibc 2.28's
        # libpthread/libdl/librt (merged into libc only in 2.34), so those symbols get versions.
        return (f"-l:{NONSHARED}", f"-Wl,--exclude-libs,{NONSHARED}",
                "-Wl,--push-state,--as-needed", "-lpthread", "-ldl", "-lrt", "-Wl,--pop-state")


def assemble(zig: Path, dest: Path, glibc: str, cxx: str = "c++", log: Callable[[str], None] = lambda _: None) -> dict:
    """Build a sysroot for glibc `glibc` ("2.28") in the empty folder `dest` from the zig install
    at `zig` (the folder holding the `zig` binary and lib/), for the C++ compiler `cxx` (its
    libstdc++ is what the stubs stand for). Returns what went in, for the marker."""
    if platform.machine() != "x86_64":
        raise ToolchainError(f"sysroots are built for x86_64 hosts only (this one is {platform.machine()})")
    major, minor = (int(x) for x in glibc.split("."))
    versions = policy_versions(f"{major}_{minor}")
    headers = _headers(zig / "lib" / "libc" / "include", dest / "usr" / "include", minor)
    log(f"glibc {glibc} headers: {headers} files")
    libs = dest / _LIB
    libs.mkdir(parents=True)
    _glibc_stubs(zig, dest, glibc)
    for crt in ("crti.o", "crtn.o"):
        shutil.copy2(_compiler_file(cxx, crt), libs / crt)
    shutil.copy2(libs / "crt1.o", libs / "Scrt1.o")  # gcc links PIE programs with Scrt1.o
    # the development names the linker looks for (-lc, -lm, ...); libc.so is a script, as glibc's
    (libs / "libc.so").write_text(f"GROUP ( /{_LIB}/libc.so.6 /{_LIB}/libc_nonshared.a "
                                  f"AS_NEEDED ( /{_LIB}/ld-linux-x86-64.so.2 ) )\n")
    for lib in _GLIBC_LIBS[1:]:
        os.symlink(lib, libs / (lib.split(".so")[0] + ".so"))
    runtime = dest / "kbuild"
    runtime.mkdir()
    kept = {}
    for lib in ("libstdc++.so.6", "libgcc_s.so.1"):  # held to the policy's GLIBCXX and GCC versions
        real = Path(os.path.realpath(_compiler_file(cxx, lib)))
        kept[lib] = elf_stub.write_stub(real, runtime / lib, lambda v: _allowed(v, versions), cc=cxx)
    shutil.copy2(_compiler_file(cxx, "libstdc++.a"), runtime / NONSHARED)
    host = {e.name for lib in _GLIBC_LIBS for e in elf_stub.exports(Path(_compiler_file(cxx, lib)))[1]}
    old = {e.name for lib in _GLIBC_LIBS for e in elf_stub.exports(libs / lib)[1]}
    (dest / NEWER).write_text("".join(f"{name}\n" for name in sorted(host - old)))
    log(f"stubs: {', '.join(f'{lib} ({n} symbols)' for lib, n in kept.items())}")
    return {"glibc": glibc, "headers": headers, "stub_symbols": kept,
            "compiler": compiler_id(cxx)}


def compiler_id(cxx: str) -> str:
    """The compiler a sysroot's libstdc++ stubs were made from (its --version line)."""
    return _first_line([cxx, "--version"])


def _allowed(version: str, versions: dict[str, set[str]]) -> bool:
    family, _, number = version.partition("_")
    return number in versions.get(family, ())


# Interface levels zig's headers (the newest glibc's) switch on under _GNU_SOURCE, which g++
# always defines, with the release that introduced them. Below it they are switched off, as that
# release's own headers had no such level: C23's rsqrt (2.41) otherwise clashes with CUDA's.
_LEVELS = (
    # (header, text after which the override goes; "" = at the end, macro, introduced in 2.N)
    ("features.h", "# define __GLIBC_USE_ISOC23\t0\n#endif\n", "__GLIBC_USE_ISOC23", 31),
    ("features.h", "# define __GLIBC_USE_ISOC2Y\t0\n#endif\n", "__GLIBC_USE_ISOC2Y", 41),
    ("bits/libc-header-start.h", "", "__GLIBC_USE_IEC_60559_FUNCS_EXT_C23", 35),
)


def _headers(source: Path, dest: Path, minor: int) -> int:
    """zig's header layers merged into one include folder (the more specific layer wins), made
    into glibc 2.`minor`'s: __GLIBC_MINOR__ fixed, headers that release did not have removed."""
    for layer in reversed(_HEADER_DIRS):
        if not (source / layer).is_dir():
            raise ToolchainError(f"{source / layer} is missing: not a zig install with glibc headers")
        shutil.copytree(source / layer, dest, dirs_exist_ok=True)
    features = dest / "features.h"
    text = features.read_text()
    marker = "#define\t__GLIBC__\t2\n"
    if marker not in text:
        raise ToolchainError(f"{features}: no `#define __GLIBC__ 2` line to put __GLIBC_MINOR__ after")
    features.write_text(text.replace(marker, f"{marker}#define\t__GLIBC_MINOR__\t{minor}\n", 1))
    for header, anchor, macro, introduced in _LEVELS:
        if minor >= introduced:
            continue
        path = dest / header
        text = path.read_text()
        override = f"/* kbuild: glibc 2.{minor} had no {macro} interfaces (2.{introduced}) */\n" \
                   f"#undef {macro}\n#define {macro} 0\n"
        if anchor and anchor not in text:
            raise ToolchainError(f"{path}: no {anchor.strip()!r} to switch {macro} off after")
        path.write_text(text.replace(anchor, anchor + override, 1) if anchor else text + "\n" + override)
    count = 0
    for path in sorted(dest.rglob("*.h")):
        # zig marks headers a release lacked: `#error "threads.h did not exist before glibc 2.28"`
        m = re.search(r'#error "\S+ did not exist before glibc 2\.(\d+)"', path.read_text(errors="replace"))
        if m and minor < int(m[1]):
            path.unlink()  # so __has_include(<sys/single_threaded.h>) is false, as on that release
        else:
            count += 1
    return count


def _glibc_stubs(zig: Path, dest: Path, glibc: str) -> None:
    """Let zig link a program for x86_64-linux-gnu.<glibc>, then take the stubs, libc_nonshared.a
    and crt1.o it made from its cache."""
    work = dest.parent / f".{dest.name}.zig"
    work.mkdir()
    try:
        (work / "main.c").write_text("int main(void) { return 0; }\n")
        env = {"ZIG_GLOBAL_CACHE_DIR": str(work / "cache"), "ZIG_LOCAL_CACHE_DIR": str(work / "local")}
        done = proc.run([str(zig / "zig"), "cc", "-target", f"x86_64-linux-gnu.{glibc}", "main.c", "-o", "main"],
                        cwd=work, env=env, check=False, what="zig cc")
        if done.returncode:
            raise ToolchainError(f"zig could not link for glibc {glibc}: {done.stdout.strip()[-300:]}")
        made = {p.name: p for p in (work / "cache" / "o").glob("*/*") if p.is_file()}
        wanted = {**{lib: lib for lib in _GLIBC_LIBS}, "libld.so.2": "ld-linux-x86-64.so.2",
                  "libc_nonshared.a": "libc_nonshared.a", "crt1.o": "crt1.o"}
        missing = sorted(set(wanted) - set(made))
        if missing:
            raise ToolchainError(f"zig made no {', '.join(missing)} for glibc {glibc} (in {work / 'cache'})")
        for name, target in wanted.items():
            shutil.copy2(made[name], dest / _LIB / target)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _compiler_file(compiler: str, name: str) -> str:
    path = _first_line([compiler, f"-print-file-name={name}"])
    if not os.path.isabs(path) or not os.path.exists(path):
        raise ToolchainError(f"{compiler} has no {name} (it printed {path!r} for -print-file-name)")
    return path


def _first_line(cmd: list[str]) -> str:
    try:
        done = proc.run(cmd, timeout=60, what=cmd[0])
    except CommandError as e:
        raise ToolchainError(f"{' '.join(cmd)} failed: {e}") from None
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
