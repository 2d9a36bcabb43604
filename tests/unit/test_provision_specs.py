"""Toolchain specs, their one-line errors and pruning, without installing anything."""

from __future__ import annotations

import os

import pytest

from builder.backends import BACKENDS
from builder.commands.main import main
from builder.toolchains.provision import ToolchainStore
from builder.toolchains.spec import Spec, parse_spec
from builder.toolchains.versions import load_versions_table
from kbuild_common.errors import ToolchainError, UsageError

CUDA_132 = load_versions_table()["cuda"]["13.2"]["toolkit"]


@pytest.fixture
def store_root(tmp_path, monkeypatch):
    root = tmp_path / "toolchains"
    monkeypatch.setenv("KBUILD_TOOLCHAINS", str(root))
    return root


def kbuild(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- specs and errors (no process) ---------------------------------------------------------------


def test_specs_resolve_through_versions_toml():
    table = load_versions_table()
    assert parse_spec("torch-2.13", table) == Spec("torch", table["torch"]["2.13"]["version"])
    assert parse_spec("torch-2.13.0", table) == Spec("torch", "2.13.0")
    assert parse_spec("torch-2.14+cuda", table) == Spec("torch", table["torch"]["2.14"]["version"], cuda=True)
    assert parse_spec("cuda-13.2", table) == Spec("cuda", "13.2", requirement=CUDA_132)
    assert parse_spec("torch-2.13+cuda", table).name == "torch-2.13.0+cuda"
    for bad in ("torch-9.9", "torch-9.9.9", "cuda-12.1", "nvcc-13.2", "torch-2.13.0+cpu", "torch"):
        with pytest.raises(UsageError, match="unknown toolchain .*torch-2.13.*cuda-13.2"):
            parse_spec(bad, table)


def test_unknown_spec_is_a_one_line_error_and_installs_nothing(store_root, capsys):
    # cuda-13.2 is valid, but every spec is checked before anything is installed.
    code, out, err = kbuild(capsys, "toolchain", "install", "cuda-13.2", "torch-9.9")
    assert code == UsageError.exit_code
    assert err.startswith("kbuild: error: unknown toolchain 'torch-9.9': expected one of torch-2.11,")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not store_root.exists()


def test_a_torch_version_that_is_not_a_release_is_a_one_line_error(tmp_path):
    for version in ("2.13", "2.13.0+cpu", "latest"):
        with pytest.raises(ToolchainError) as e:
            ToolchainStore(tmp_path).torch_python(version)
        assert "\n" not in str(e.value) and "expected an exact release" in str(e.value)


def test_an_unknown_device_build_is_a_one_line_error_naming_the_known_ones(tmp_path):
    """`device` names a compiled backend with a device build of torch; anything else (a typo, a
    backend without one) is refused before anything is probed or installed."""
    known = [name for name, b in BACKENDS.items() if b.torch_device_build]
    for device in ("cdua", "noarch", ""):
        with pytest.raises(ToolchainError) as e:
            ToolchainStore(tmp_path / "toolchains").torch_python("2.13.0", device)
        message = str(e.value)
        assert "\n" not in message and repr(device) in message
        assert all(name in message for name in known)
    assert not (tmp_path / "toolchains").exists()


def test_prune_removes_leftovers_of_dead_installs_only(store_root, capsys):
    dead = store_root / ".torch-2.13.0.tmp-4194999"  # above any pid_max: no such process
    alive = store_root / f".cuda-13.2.tmp-{os.getpid()}"
    for folder in (dead, alive):
        (folder / "bin").mkdir(parents=True)
        (folder / "bin" / "python").write_text("x" * 10000)
    unmarked = store_root / "cuda-13.0"  # renamed into place, interrupted before its marker
    unmarked.mkdir()
    (store_root / "torch-2.99.0.install.log").write_text("ERROR: no such torch\n")
    code, out, _ = kbuild(capsys, "toolchain", "prune", "--dry-run")
    assert code == 0 and "would free" in out
    assert dead.exists() and unmarked.exists()
    code, out, _ = kbuild(capsys, "toolchain", "prune")
    assert code == 0, out
    assert f"removed {dead}" in out and f"removed {unmarked}" in out and "freed" in out
    assert sorted(p.name for p in store_root.iterdir() if p.suffix != ".lock") == [alive.name]
    code, out, _ = kbuild(capsys, "toolchain", "prune")
    assert code == 0 and "nothing to prune" in out


def test_prune_of_an_unknown_toolchain_is_a_one_line_error(store_root, capsys):
    code, out, err = kbuild(capsys, "toolchain", "prune", "cuda-13.2")
    assert code == UsageError.exit_code
    assert err.strip() == f"kbuild: error: prune: no toolchain cuda-13.2 in {store_root} (installed: none)"
