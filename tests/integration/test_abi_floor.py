"""The ABI floor: symbol versions read from libraries linked here with the real gcc, the manylinux
policy from auditwheel's data, the stable-ABI and limited-API checks, and the loader skipping a
variant whose recorded floor this host is below (local folders and a real local hub)."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from builder.commands.main import main
from builder.stage.abi_check import library_problems
from builder.toolchains.binary.elf import ELF
from builder.toolchains.binary.manylinux_floor import above, floor, needs
from cpu_kernel import write_cpu_kernel
from kbuild import get_kernel, get_kernel_variants, has_kernel, host_abi, resolve_kernel
from kbuild.loading import find_variant
from kbuild.metadata import VariantMetadata
from runtime_hubs import CUDA130, Kernel, new_process, runtime_env, start_server, torch_probes  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

# dlsym moved into libc.so.6 in glibc 2.34: linked on a newer glibc, it needs GLIBC_2.34
DLSYM = "#include <dlfcn.h>\nvoid *f(void *h) { return dlsym(h, \"x\"); }\n"
PLAIN = "int f(int x) { return x + 1; }\n"
STRING = "#include <string>\nstd::string f(const char *s) { return std::string(s) + \"!\"; }\n"


def link(tmp_path: Path, source: str, name: str, compiler: str = "gcc", *flags: str) -> Path:
    src = tmp_path / f"{name}.{'cpp' if compiler == 'g++' else 'c'}"
    src.write_text(source)
    out = tmp_path / f"{name}.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", str(src), "-o", str(out), *flags], check=True)
    return out


def host_glibc_at_least(version):
    return host_abi.glibc() is not None and host_abi.glibc() >= version


# --- reading the floor ----------------------------------------------------------------------------


@pytest.mark.skipif(not host_glibc_at_least((2, 34)), reason="needs glibc >= 2.34 to link against")
def test_a_new_glibc_symbol_sets_the_floor_and_names_itself(tmp_path):
    lib = link(tmp_path, DLSYM, "dl")
    found = floor([lib])
    assert found.newest["GLIBC"].version == "2.34" and found.newest["GLIBC"].symbol == "dlsym"
    assert found.policy == "manylinux_2_34_x86_64"
    assert found.as_metadata()["glibc"] == "2.34"
    bad = above([lib], "2_28")
    assert [(n.tag, n.symbol, n.library) for n in bad][0] == ("GLIBC_2.34", "dlsym", "dl.so")
    assert above([lib], "manylinux_2_34") == []


def test_a_library_without_new_symbols_is_manylinux1(tmp_path):
    lib = link(tmp_path, PLAIN, "plain")
    assert floor([lib]).policy == "manylinux_2_5_x86_64"


def test_libstdcxx_versions_are_recorded(tmp_path):
    lib = link(tmp_path, STRING, "cxx", "g++")
    record = floor([lib]).as_metadata()
    assert record["glibcxx"].startswith("3.4.") and int(record["glibcxx"].split(".")[2]) >= 21  # the cxx11 string ABI
    assert {n.family for n in needs(lib)} >= {"GLIBC", "GLIBCXX"}


def test_the_newest_of_several_libraries_wins(tmp_path):
    plain, cxx = link(tmp_path, PLAIN, "plain"), link(tmp_path, STRING, "cxx", "g++")
    assert floor([plain, cxx]).as_metadata() == floor([cxx]).as_metadata()


# --- what a kernel library may use ----------------------------------------------------------------


def test_torch_cxx_symbols_break_the_stable_abi(tmp_path):
    lib = link(tmp_path, "namespace c10 { void warn(int); }\nvoid f() { c10::warn(1); }\n", "cxxapi", "g++")
    assert library_problems(lib, ELF) == []  # a compiled (torch-version-tagged) variant may use them
    problem, = library_problems(lib, ELF, stable_abi=True)
    assert "stable-ABI variant but uses torch's C++ API: _ZN3c104warnEi" in problem


def test_stable_c_shim_symbols_are_fine(tmp_path):
    source = "int aoti_torch_get_device_index(void *, int *);\nint f(void *t) { int i; return aoti_torch_get_device_index(t, &i); }\n"
    assert library_problems(link(tmp_path, source, "shim"), ELF, stable_abi=True) == []


def test_python_api_outside_the_limited_api_is_reported(tmp_path):
    source = ("void *PyModule_Create2(void *, int);\nvoid _PyObject_Dump(void *);\n"
              "void *f(void *d) { _PyObject_Dump(d); return PyModule_Create2(d, 3); }\n")
    problem, = library_problems(link(tmp_path, source, "py"), ELF)
    assert "py.so uses _PyObject_Dump, outside the limited Python API" in problem  # PyModule_Create2 is in it


# --- the build ----------------------------------------------------------------------------------


def write_kernel(root: Path, extra: str = "") -> Path:
    source = '#include <dlfcn.h>\nextern "C" void *floor_probe(void *h) { return dlsym(h, "x"); }\n'
    return write_cpu_kernel(root, "floor", source, extra=extra, depends='["torch"]')


@pytest.mark.skipif(not host_glibc_at_least((2, 34)), reason="needs glibc >= 2.34 to link against")
def test_build_records_the_floor_and_enforces_a_policy(tmp_path, capsys):
    kernel = write_kernel(tmp_path / "floor")
    assert main(["build", str(kernel)]) == 0, capsys.readouterr()
    built = [d for d in (kernel / "build").iterdir() if (d / "metadata.json").is_file()]
    record = json.loads((built[0] / "metadata.json").read_text())["abi"]
    assert record["glibc"] >= "2.34" and record["manylinux"].startswith("manylinux_2_")
    assert VariantMetadata.for_variant(built[0]).abi.glibc == record["glibc"]
    out = capsys.readouterr()
    assert f"needs {record['manylinux']} (glibc {record['glibc']}" in out.out + out.err
    assert "the lowest manylinux policy that allows them)" in out.out + out.err

    # built with this host's glibc (--no-sysroot), the policy only checks: tests/integration/test_sysroot.py
    # builds the same way against a glibc 2.28 sysroot and passes
    assert main(["build", str(kernel), "--manylinux", "2_28", "--no-sysroot"]) != 0
    out = capsys.readouterr()
    assert "needs GLIBC_2.34 (dlsym), above manylinux_2_28_x86_64" in out.out + out.err

    write_kernel(kernel, extra='manylinux = "2_28"')
    assert main(["build", str(kernel), "--no-sysroot"]) != 0
    assert "above manylinux_2_28_x86_64" in "".join(capsys.readouterr())


# --- the loader -----------------------------------------------------------------------------------


OLD_HOST = replace(CUDA130, glibc=(2, 28), glibcxx=(3, 4, 25))
NEW_HOST = replace(CUDA130, glibc=(2, 39), glibcxx=(3, 4, 33))


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    kernel = Kernel(tmp_path / "tiny").write().build()
    for name, glibc in (("torch-stable-abi210-cu130-x86_64-linux", "2.34"), ("torch214-cxx11-cu130-x86_64-linux", "2.17")):
        target = kernel.fake(name)
        meta = json.loads((target / "metadata.json").read_text())
        meta["abi"] = {"glibc": glibc, "glibcxx": "3.4.21", "manylinux": f"manylinux_{glibc.replace('.', '_')}_x86_64"}
        (target / "metadata.json").write_text(json.dumps(meta))
    return kernel


def test_local_loader_skips_a_variant_above_this_host(kernel):
    assert find_variant(kernel.root, NEW_HOST).name == "torch-stable-abi210-cu130-x86_64-linux"
    assert find_variant(kernel.root, OLD_HOST).name == "torch214-cxx11-cu130-x86_64-linux"


def test_hub_loader_skips_a_variant_above_this_host_with_the_reason(kernel, tmp_path, runtime_env):
    hub = tmp_path / "hub"
    kernel.publish(hub)
    assert get_kernel("org/tiny@v1", hub=str(hub), system=NEW_HOST).VARIANT == "torch-stable-abi210-cu130-x86_64-linux"
    assert get_kernel("org/tiny@v1", hub=str(hub), system=OLD_HOST).VARIANT == "torch214-cxx11-cu130-x86_64-linux"


def test_resolving_applies_the_floors_get_kernel_applies(kernel, tmp_path, runtime_env):
    # has_kernel, get_kernel_variants and resolve_kernel read the candidates' metadata.json, so
    # they answer as get_kernel loads
    hub = tmp_path / "hub"
    kernel.publish(hub)
    trace = get_kernel_variants("org/tiny@v1", hub=str(hub), system=OLD_HOST)
    assert trace[0].name == "torch214-cxx11-cu130-x86_64-linux" and trace[0].accepted
    stable = next(c for c in trace if c.name == "torch-stable-abi210-cu130-x86_64-linux")
    assert not stable.accepted and stable.reason == "needs glibc 2.34, this system has 2.28"
    assert resolve_kernel("org/tiny@v1", hub=str(hub), system=OLD_HOST).chosen == "torch214-cxx11-cu130-x86_64-linux"
    assert resolve_kernel("org/tiny@v1", hub=str(hub), system=NEW_HOST).chosen == "torch-stable-abi210-cu130-x86_64-linux"
    assert has_kernel("org/tiny@v1", hub=str(hub), system=OLD_HOST)


def test_info_rejects_a_variant_above_this_host(kernel, tmp_path, runtime_env, capsys):
    meta_path = kernel.variant("torch-cpu") / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["abi"] = {"glibc": "99.0", "manylinux": "manylinux_99_0_x86_64"}
    meta_path.write_text(json.dumps(meta))
    hub = tmp_path / "hub"
    kernel.publish(hub)
    capsys.readouterr()
    assert main(["info", "org/tiny@v1", "--hub", str(hub), "--backend", "cpu", "--json"]) == 0
    rows = {r["variant"]: r for r in json.loads(capsys.readouterr().out)["variants"]}
    cpu = rows["torch-cpu"]
    assert not cpu["fits"] and not cpu["loads"] and cpu["why"].startswith("needs glibc 99.0, this system has ")
    assert cpu["floor"] == "manylinux_99_0_x86_64"


def test_no_variant_at_or_below_this_host_names_the_floor(kernel, tmp_path, runtime_env):
    for name in ("torch214-cxx11-cu130-x86_64-linux", "torch-cuda", "torch-cpu"):
        shutil.rmtree(kernel.variant(name))
    hub = tmp_path / "hub"
    kernel.publish(hub)
    with pytest.raises(FileNotFoundError) as err:
        get_kernel("org/tiny@v1", hub=str(hub), system=OLD_HOST)
    assert "torch-stable-abi210-cu130-x86_64-linux: rejected (needs glibc 2.34, this system has 2.28)" in str(err.value)
    assert not has_kernel("org/tiny@v1", hub=str(hub), system=OLD_HOST)


def test_offline_the_floors_come_from_the_cached_copies(kernel, tmp_path, runtime_env, monkeypatch):
    # offline (or with the hub gone) nothing can be read from the hub: the floor of a variant in the
    # cache is its cached metadata.json's, the copy get_kernel would load
    served, stop = start_server(tmp_path / "served")
    try:
        monkeypatch.setenv("HF_TOKEN", served.token)
        kernel.publish(served.url)
        monkeypatch.delenv("HF_TOKEN")
        stable = "torch-stable-abi210-cu130-x86_64-linux"
        assert get_kernel("org/tiny@v1", hub=served.url, system=NEW_HOST, trust_remote_code=True).VARIANT == stable
        new_process()
        monkeypatch.setenv("KBUILD_OFFLINE", "1")
        mark = served.mark()
        trace = {c.name: c for c in get_kernel_variants("org/tiny@v1", hub=served.url, system=OLD_HOST)}
        assert not trace[stable].accepted and trace[stable].reason == "needs glibc 2.34, this system has 2.28"
        assert trace["torch214-cxx11-cu130-x86_64-linux"].accepted  # not cached: its floor is unknown here
        assert resolve_kernel("org/tiny@v1", hub=served.url, system=NEW_HOST).chosen == stable
        assert served.requests(mark) == []
    finally:
        stop()
