"""The manylinux build route: libstdc++ stubs held to a policy's versions (real g++, real
libstdc++), a glibc 2.28 sysroot assembled from PyPI's ziglang, and kernels built against it with
`--manylinux 2_28` / `[general] manylinux` whose libraries then need nothing newer — checked by
the symbol scan and by loading them."""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.commands.main import main
from builder.project.manylinux import policy_versions
from builder.toolchains.binary.manylinux_floor import above, floor, needs
from builder.toolchains.elf_stub import exports, write_stub
from builder.toolchains.provision import ToolchainStore
from builder.toolchains.sysroot import NEWER, Sysroot
from builder.toolchains.versions import load_versions_table
from cpu_kernel import write_cpu_kernel
from kbuild import host_abi

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

ALLOWED = policy_versions("2_28")
CXX_PROGRAM = """#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
extern "C" int probe(int n) {
  auto text = std::make_shared<std::string>("x");
  std::vector<int> v(n, 1);
  std::thread t([&] { v[0] = 2; });
  t.join();
  std::ostringstream out;
  out << *text << v.size();
  try { if (n > 3) throw std::runtime_error(out.str()); } catch (const std::exception &e) { return -1; }
  return v[0];
}
"""


def allowed(version: str) -> bool:
    family, _, number = version.partition("_")
    return number in ALLOWED.get(family, ())


def cxx_file(name: str) -> Path:
    return Path(subprocess.run(["g++", f"-print-file-name={name}"], capture_output=True, text=True,
                               check=True).stdout.strip()).resolve()


def versions_needed(library: Path) -> set[str]:
    return {n.tag for n in needs(library)}


# --- stubs: no zig needed ----------------------------------------------------------------------


def test_a_libstdcxx_stub_keeps_only_the_policys_versions(tmp_path):
    real = cxx_file("libstdc++.so.6")
    kept = write_stub(real, tmp_path / "libstdc++.so.6", allowed)
    soname, symbols = exports(tmp_path / "libstdc++.so.6")
    assert soname == "libstdc++.so.6" and len(symbols) == kept
    assert kept < len(exports(real)[1])  # gcc 12's libstdc++ has GLIBCXX_3.4.26+ symbols the policy bars
    assert {s.version for s in symbols} <= {f"GLIBCXX_{v}" for v in ALLOWED["GLIBCXX"]} | {
        f"CXXABI_{v}" for v in ALLOWED["CXXABI"]}
    assert any(s.version == "GLIBCXX_3.4.21" and s.default for s in symbols)


def test_linking_the_stub_and_the_archive_runs_with_old_versions_only(tmp_path):
    """devtoolset's arrangement: the stub binds what the policy allows, libstdc++.a supplies the
    rest privately; the library loads and runs against the real libstdc++."""
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    write_stub(cxx_file("libstdc++.so.6"), lib_dir / "libstdc++.so.6", allowed)
    write_stub(cxx_file("libgcc_s.so.1"), lib_dir / "libgcc_s.so.1", allowed)
    shutil.copy2(cxx_file("libstdc++.a"), lib_dir / "libstdc++_nonshared.a")
    src = tmp_path / "probe.cpp"
    src.write_text(CXX_PROGRAM)
    out = tmp_path / "probe.so"
    subprocess.run(["g++", "-shared", "-fPIC", "-O2", str(src), "-o", str(out), f"-L{lib_dir}",
                    "-l:libstdc++.so.6", "-l:libstdc++_nonshared.a", "-Wl,--exclude-libs,libstdc++_nonshared.a"],
                   check=True)
    bad = [tag for tag in versions_needed(out) if not tag.startswith("GLIBC_") and not allowed(tag)]
    assert bad == []
    assert ctypes.CDLL(str(out)).probe(2) == 2 and ctypes.CDLL(str(out)).probe(5) == -1


# --- the sysroot, assembled from PyPI's ziglang ---------------------------------------------------


@pytest.fixture(scope="module")
def toolchains(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toolchains")
    ToolchainStore(root).sysroot("2.28", load_versions_table()["sysroot"]["requirement"], "c++")
    return root


def test_the_sysroot_is_glibc_2_28s(toolchains):
    marker = json.loads((toolchains / "sysroot-2.28" / "kbuild-toolchain.json").read_text())
    root = sysroot_of(toolchains).root
    include = root / "usr" / "include"
    assert "#define\t__GLIBC_MINOR__\t28" in (include / "features.h").read_text()
    assert (include / "threads.h").is_file()  # new in 2.28
    assert not (include / "sys" / "single_threaded.h").exists()  # 2.32: libstdc++ must not see it
    lib = root / "usr" / "lib" / "x86_64-linux-gnu"
    libc = {e.version for e in exports(lib / "libc.so.6")[1]}
    assert "GLIBC_2.28" in libc and "GLIBC_2.29" not in libc and "GLIBC_2.34" not in libc
    newer = set((root / NEWER).read_text().split())
    assert {"gettid", "__libc_single_threaded"} <= newer and "dlsym" not in newer  # dlsym: libdl in 2.28
    assert marker["kind"] == "sysroot" and marker["glibc"] == "2.28"


def write_kernel(root: Path, extra: str = "", body: str = "") -> Path:
    # dlsym (libc.so.6 since 2.34), a std::thread, streams: what pulls glibc and libstdc++ up
    source = '#include <dlfcn.h>\n' + CXX_PROGRAM + 'extern "C" void *old_symbol(void *h) { return dlsym(h, "x"); }\n'
    return write_cpu_kernel(root, "old", source + body, extra=extra)


def sysroot_of(toolchains: Path) -> Sysroot:
    marker = json.loads((toolchains / "sysroot-2.28" / "kbuild-toolchain.json").read_text())
    return Sysroot(toolchains / "sysroot-2.28" / marker["root"], "2.28")


def built_library(kernel: Path) -> Path:
    return next(p for p in (kernel / "build").rglob("*.so") if "_old_cpu" in p.name)


def test_a_manylinux_2_28_build_needs_nothing_newer_and_runs(toolchains, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBUILD_TOOLCHAINS", str(toolchains))
    kernel = write_kernel(tmp_path / "old", extra='manylinux = "2_28"')
    assert main(["build", str(kernel)]) == 0, capsys.readouterr()
    out = "".join(capsys.readouterr())
    assert "building for manylinux glibc 2.28 against" in out
    library = built_library(kernel)
    assert above([library], "2_28") == []
    assert versions_needed(library) >= {"GLIBC_2.2.5"} and "GLIBC_2.34" not in versions_needed(library)
    record = json.loads((library.parent / "metadata.json").read_text())["abi"]
    assert record == floor([library]).as_metadata() and record["glibc"] <= "2.28"
    assert not sysroot_of(toolchains).too_new(library)
    import torch  # noqa: F401  (loads libc10.so and the rest the kernel library links)

    probe = ctypes.CDLL(str(library))
    assert probe.probe(2) == 2 and probe.probe(5) == -1  # threads, streams and exceptions work

    if host_abi.glibc() >= (2, 34):  # without the sysroot, this host's dlsym@GLIBC_2.34 shows
        assert main(["build", str(kernel), "--no-sysroot"]) != 0
        assert "needs GLIBC_2.34 (dlsym), above manylinux_2_28_x86_64" in "".join(capsys.readouterr())


def test_a_function_the_old_glibc_lacks_fails_the_build_by_name(toolchains, tmp_path, monkeypatch, capsys):
    """gettid (glibc 2.30) is declared by zig's newer headers; the stubs cannot version it, so the
    library would not load on 2.28: the build says so instead of publishing it."""
    monkeypatch.setenv("KBUILD_TOOLCHAINS", str(toolchains))
    kernel = write_kernel(tmp_path / "new", body='#include <unistd.h>\nextern "C" long tid() { return gettid(); }\n')
    assert main(["build", str(kernel), "--manylinux", "2_28"]) != 0
    err = "".join(capsys.readouterr())
    assert "uses gettid, which glibc 2.28 does not have" in err and "Traceback" not in err


DISTRIBUTION_PYTHON = Path("/usr/bin/python3")


def distribution_python_with_torch(root: Path) -> Path:
    """A venv of the distribution's own Python (Debian's /usr/bin/python3, whose pyconfig.h includes
    the multiarch <x86_64-linux-gnu/python3.11/pyconfig.h>) that imports this environment's torch:
    its site-packages on the path through a .pth file (the same CPython minor, so the same ABI)."""
    subprocess.run([str(DISTRIBUTION_PYTHON), "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    import sysconfig

    import torch

    version = subprocess.run([str(root / "bin" / "python"), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (root / "lib" / f"python{version}" / "site-packages" / "kbuild-torch.pth").write_text(
        str(Path(torch.__file__).parent.parent) + "\n" + sysconfig.get_paths()["purelib"] + "\n")
    return root / "bin" / "python"


def test_a_manylinux_build_with_the_distributions_python_finds_its_multiarch_headers(toolchains, tmp_path, monkeypatch,
                                                                                    capsys):
    """The Python's own headers are outside the sysroot: -I gives its include folder, and a
    distribution Python's multiarch pyconfig.h, which --sysroot would hide, is copied into a folder
    of its own, never the host's whole /usr/include (the sysroot's glibc stays the only one seen)."""
    import sys
    import sysconfig

    if not DISTRIBUTION_PYTHON.is_file():
        pytest.skip("no distribution Python at /usr/bin/python3")
    probe = subprocess.run([str(DISTRIBUTION_PYTHON), "-c", "import sys, sysconfig; print(sys.version_info[:2] == (3, 11) "
                            "and sysconfig.get_config_var('MULTIARCH') or '')"], capture_output=True, text=True)
    multiarch = probe.stdout.strip()
    if sys.version_info[:2] != (3, 11) or not multiarch or multiarch == "False":
        pytest.skip("the distribution Python is not a multiarch CPython 3.11, the ABI of this torch")
    include = Path(subprocess.run([str(DISTRIBUTION_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    if not (include / "Python.h").is_file() or not (include.parent / multiarch / include.name / "pyconfig.h").is_file():
        pytest.skip(f"the distribution Python has no development headers ({include}, python3-dev)")
    assert f"<{multiarch}/{include.name}/pyconfig.h>" in (include / "pyconfig.h").read_text()

    python = distribution_python_with_torch(tmp_path / "debian-venv")
    monkeypatch.setenv("KBUILD_TOOLCHAINS", str(toolchains))
    pythons = [("distribution", python)]
    # this session's own Python, when it is a self-contained one (pyenv's, uv's): a venv made from the
    # distribution's Python (a Debian user's .venv) has its multiarch pyconfig.h, so nothing to show
    if f"<{multiarch}/" not in (Path(sysconfig.get_paths()["include"]) / "pyconfig.h").read_text():
        pythons.append(("self-contained", Path(sys.executable)))
    for name, py in pythons:
        kernel = write_kernel(tmp_path / name, extra='manylinux = "2_28"')
        assert main(["build", str(kernel), "--python", str(py)]) == 0, (name, capsys.readouterr())
        out = "".join(capsys.readouterr())
        assert "building for manylinux glibc 2.28 against" in out, out
        library = built_library(kernel)
        assert above([library], "2_28") == [] and not sysroot_of(toolchains).too_new(library)
        copied = kernel / ".kbuild" / "include" / "python-multiarch"
        if name == "distribution":  # only the Python's folder, under its own relative path
            assert sorted(p.relative_to(copied).as_posix() for p in copied.rglob("*") if p.is_file()) == [
                f"{multiarch}/{include.name}/pyconfig.h"]
            assert "-isystem" in (kernel / ".kbuild" / "build.ninja").read_text()
        else:
            assert not copied.exists()
