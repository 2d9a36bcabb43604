"""The loaders reject, before anything of it is imported, a variant whose recorded GPU archs do not
run on this GPU, whose python-depends are missing, or that is compiled when this Python is
free-threaded: in the trace (get_kernel_variants), the error of get_kernel, `kbuild info` and
the local and lock loaders. A real tiny kernel built and published with the real CLI into a real
local git hub; the GPU is named through SystemInfo.gpu_arch or KBUILD_GPU_ARCH, the probe's
stand-ins (tests/unit/test_gpu_arch.py has the rules themselves)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest

from builder.commands.main import main
from kbuild import get_kernel, get_kernel_variants, get_locked_kernel, has_kernel, install_kernel, resolve_kernel
from kbuild.loading import find_variant
from kbuild.lockfile import lock_kernel, write_lock
from runtime_hubs import CUDA130, Kernel, runtime_env, torch_probes  # noqa: F401 (fixtures)

COMPILED = "torch214-cxx11-cu130-x86_64-linux"
STABLE = "torch-stable-abi210-cu130-x86_64-linux"
AMPERE = replace(CUDA130, gpu_arch="8.6")
HOPPER = replace(CUDA130, gpu_arch="9.0")


def set_metadata(folder, **fields) -> None:
    """Edit a built variant's metadata.json (outside its digest, which covers the other files)."""
    path = folder / "metadata.json"
    meta = json.loads(path.read_text())
    for key, value in fields.items():
        if key == "archs":
            meta["backend"]["archs"] = value
        else:
            meta[key.replace("_", "-")] = value
    path.write_text(json.dumps(meta, indent=2))


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    """torch-cpu, torch-cuda (Python-only: no archs) and a compiled variant built for Hopper only
    (9.0a)."""
    kernel = Kernel(tmp_path / "tiny").write().build()
    set_metadata(kernel.fake(COMPILED), archs=["9.0a"])
    return kernel


@pytest.fixture
def hub(kernel, tmp_path):
    hub = tmp_path / "hub"
    kernel.publish(hub)
    return str(hub)


def test_local_loader_checks_the_archs(kernel):
    assert find_variant(kernel.root, HOPPER).name == COMPILED
    assert find_variant(kernel.root, AMPERE).name == "torch-cuda"  # Python-only: nothing to check
    assert find_variant(kernel.root, CUDA130).name == COMPILED  # GPU unknown: nothing checked
    set_metadata(kernel.variant("torch-cuda"), archs=["10.0f"])
    with pytest.raises(FileNotFoundError) as err:
        find_variant(kernel.root, AMPERE)
    message = str(err.value)
    assert "on a GPU of compute capability 8.6" in message.splitlines()[0]
    assert (f"  {COMPILED}: rejected (built for CUDA archs 9.0a, none of which runs on this GPU "
            "(compute capability 8.6))") in message
    assert "  torch-cuda: rejected (built for CUDA archs 10.0f, none of which runs" in message


def test_the_trace_names_each_verdict(hub, runtime_env):
    trace = {c.name: c for c in get_kernel_variants("org/tiny@v1", hub=hub, system=AMPERE)}
    assert not trace[COMPILED].accepted
    assert trace[COMPILED].reason == "built for CUDA archs 9.0a, none of which runs on this GPU (compute capability 8.6)"
    assert trace["torch-cuda"].accepted and trace["torch-cuda"].note is None  # Python-only: nothing to check
    assert resolve_kernel("org/tiny@v1", hub=hub, system=AMPERE).chosen == "torch-cuda"
    assert resolve_kernel("org/tiny@v1", hub=hub, system=HOPPER).chosen == COMPILED
    # check_arch=False, as in Hugging Face's loader: the recorded archs are not held against the GPU
    assert resolve_kernel("org/tiny@v1", hub=hub, system=AMPERE, check_arch=False).chosen == COMPILED


def test_a_compiled_build_recording_no_archs_stays_loadable_and_says_so(kernel, tmp_path, runtime_env):
    # older kernel-builder builds record no archs: loaded, as Hugging Face's loader does
    set_metadata(kernel.fake(STABLE), archs=[])
    hub = str(tmp_path / "hub")
    kernel.publish(hub)
    trace = get_kernel_variants("org/tiny@v1", hub=hub, system=AMPERE)
    assert trace[0].name == STABLE and trace[0].note == "no CUDA archs recorded, so not checked against this GPU (8.6)"
    assert get_kernel("org/tiny@v1", hub=hub, system=AMPERE).VARIANT == STABLE


def test_a_build_that_runs_only_through_ptx_says_so(kernel, tmp_path, runtime_env):
    set_metadata(kernel.variant(COMPILED), archs=["8.0", "8.6+PTX"])
    hub = str(tmp_path / "hub")
    kernel.publish(hub)
    found = resolve_kernel("org/tiny@v1", hub=hub, system=HOPPER)
    assert found.chosen == COMPILED and found.trace[0].note == "this GPU (9.0) runs it by JIT-compiling the PTX of 8.6+PTX"


def test_get_kernel_skips_a_variant_this_gpu_cannot_run(hub, runtime_env):
    assert get_kernel("org/tiny@v1", hub=hub, system=AMPERE).VARIANT == "?"  # torch-cuda, built as Python-only
    assert get_kernel("org/tiny@v1", hub=hub, system=HOPPER).VARIANT == COMPILED
    # the module loaded for Hopper is not handed out for a GPU it cannot run on
    assert get_kernel("org/tiny@v1", hub=hub, system=AMPERE).VARIANT == "?"


def test_a_variant_passed_over_is_not_read_again_on_the_next_get_kernel(hub, tmp_path, runtime_env):
    assert get_kernel("org/tiny@v1", hub=hub, system=AMPERE).VARIANT == "?"
    # the first choice was fetched, judged by its metadata.json and passed over; its copy goes away
    passed_over, = [p for p in (tmp_path / "cache").rglob(COMPILED) if p.is_dir()]
    shutil.rmtree(passed_over)
    assert get_kernel("org/tiny@v1", hub=hub, system=AMPERE).VARIANT == "?"
    assert not passed_over.exists()  # this process judged it once: not fetched or checked again
    assert get_kernel("org/tiny@v1", hub=hub, system=HOPPER).VARIANT == COMPILED  # where it fits, it loads


def test_when_no_variant_runs_on_this_gpu_the_error_says_why(kernel, tmp_path, runtime_env):
    set_metadata(kernel.variant("torch-cuda"), archs=["9.0a"])
    hub = str(tmp_path / "hub")
    kernel.publish(hub)
    assert not has_kernel("org/tiny@v1", hub=hub, system=AMPERE)
    assert has_kernel("org/tiny@v1", hub=hub, system=AMPERE, check_arch=False)
    with pytest.raises(FileNotFoundError) as err:
        get_kernel("org/tiny@v1", hub=hub, system=AMPERE)
    message = str(err.value)
    assert "fits this system (torch 2.14, cu130 on a GPU of compute capability 8.6, x86_64-linux;" in message
    assert (f"  {COMPILED}: rejected (built for CUDA archs 9.0a, none of which runs on this GPU "
            "(compute capability 8.6))") in message.splitlines()
    assert "  torch-cuda: rejected (built for CUDA archs 9.0a, none of which runs" in message
    assert message.endswith(f"ask its publisher for a build for {COMPILED} (a GPU of compute capability 8.6).")
    assert "Traceback" not in message
    assert get_kernel("org/tiny@v1", hub=hub, system=AMPERE, check_arch=False).VARIANT == COMPILED


def test_a_missing_python_dependency_is_named_with_its_pip_install(kernel, tmp_path, runtime_env):
    for name in ("torch-cuda", COMPILED):
        set_metadata(kernel.variant(name), python_depends=["tvm-ffi"])
    hub = str(tmp_path / "hub")
    kernel.publish(hub)
    with pytest.raises(FileNotFoundError) as err:
        get_kernel("org/tiny@v1", hub=hub, system=HOPPER)
    lines = str(err.value).splitlines()
    assert (f"  {COMPILED}: rejected (needs the Python package apache-tvm-ffi, not installed here: "
            "pip install apache-tvm-ffi)") in lines
    # the download happened (get_kernel reads the metadata of the copy it would import), nothing was imported
    assert not any(m.startswith("_tiny_") for m in __import__("sys").modules)
    with pytest.raises(FileNotFoundError, match="pip install apache-tvm-ffi"):
        install_kernel("org/tiny@v1", hub=hub, system=HOPPER)


def test_a_free_threaded_python_takes_the_python_only_build(hub, runtime_env):
    free = replace(HOPPER, free_threaded=True)
    trace = {c.name: c for c in get_kernel_variants("org/tiny@v1", hub=hub, system=free)}
    assert "free-threaded Python cannot import" in trace[COMPILED].reason
    assert get_kernel("org/tiny@v1", hub=hub, system=free).VARIANT == "?"


def test_a_free_threaded_python_is_refused_clearly_when_all_is_compiled(kernel, tmp_path, runtime_env):
    for name in ("torch-cuda", "torch-cpu"):
        __import__("shutil").rmtree(kernel.variant(name))
    hub = str(tmp_path / "hub")
    kernel.publish(hub)
    with pytest.raises(FileNotFoundError) as err:
        get_kernel("org/tiny@v1", hub=hub, system=replace(HOPPER, free_threaded=True))
    message = str(err.value)
    assert "x86_64-linux, free-threaded Python;" in message.splitlines()[0]
    assert f"  {COMPILED}: rejected (a compiled (.abi3.so) build, which a free-threaded Python cannot import" in message


def test_a_locked_kernel_is_judged_alike(hub, tmp_path, runtime_env):
    lock = tmp_path / "kernels.lock"
    write_lock(lock, [lock_kernel("org/tiny@v1", hub=hub)])
    assert get_locked_kernel("org/tiny", lockfile=lock, hub=hub, system=AMPERE).VARIANT == "?"


def run_info(capsys, *args) -> str:
    capsys.readouterr()
    assert main(["info", *args]) == 0
    out = capsys.readouterr()
    return out.out + out.err


def test_info_shows_the_verdict_for_the_gpu_kbuild_gpu_arch_names(hub, runtime_env, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.version.cuda:
        pytest.skip("needs a CUDA build of torch (a CPU torch has no GPU to judge for)")
    monkeypatch.setenv("KBUILD_GPU_ARCH", "8.6")
    out = run_info(capsys, "org/tiny@v1", "--hub", hub)
    assert "this machine: torch 2.14, cu130 on a GPU of compute capability 8.6" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "rejected (built for CUDA archs 9.0a, none of which runs on this GPU (compute capability 8.6))" in rows[COMPILED]
    assert rows["torch-cuda"].endswith("<- get_kernel loads this")
    monkeypatch.setenv("KBUILD_GPU_ARCH", "9.0")
    record = json.loads(run_info(capsys, "org/tiny@v1", "--hub", hub, "--json"))
    loads = {r["variant"]: r for r in record["variants"]}
    assert loads[COMPILED]["loads"] and loads[COMPILED]["fits"]


def test_info_with_a_bad_kbuild_gpu_arch_is_one_line(hub, runtime_env, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    if not torch.version.cuda:
        pytest.skip("needs a CUDA build of torch")
    monkeypatch.setenv("KBUILD_GPU_ARCH", "hopper")
    capsys.readouterr()
    assert main(["info", "org/tiny@v1", "--hub", hub]) == 1
    err = capsys.readouterr().err
    assert "KBUILD_GPU_ARCH: expected a CUDA compute capability such as 9.0 or 12.0, got 'hopper'" in err
    assert "Traceback" not in err
