"""A cached variant holds exactly its verified files (issue 26): any other entry, a folder or a
link of its own (`_ops/` beside `_ops.py`, which Python would import instead), `__pycache__`, a
`.pth`, a fifo, makes the copy doubtful before import and on every reuse, and it is fetched
again; and the import itself finds submodules only among the verified files, so a folder that
slipped past every check (a local build, not the cache) still never runs."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import shutil
import sys
from pathlib import Path

import pytest

from kbuild import get_kernel, get_local_kernel, install_kernel
from kbuild._import import import_package
from runtime_hubs import Kernel, new_process, runtime_env, start_server, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    return Kernel(tmp_path / "tiny").write().build()


@pytest.fixture
def hub(tmp_path, kernel) -> Path:
    hub = tmp_path / "hub"
    kernel.publish(hub)
    return hub


@pytest.fixture
def planted(tmp_path) -> Path:
    """A package whose import leaves a trace (`ran`) and whose `ops` says where it came from."""
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "__init__.py").write_text(f"import pathlib\npathlib.Path({str(tmp_path / 'ran')!r}).write_text('x')\n"
                                      "ops = 'planted'\n")
    return evil


def plant_pyc(path: Path, evil: Path) -> None:
    init = path / "__init__.py"
    py_compile.compile(str(evil / "__init__.py"), cfile=importlib.util.cache_from_source(str(init)), doraise=True)


PLANTS = {  # name -> (plant(variant folder, planted package), what the refusal says)
    "a linked folder _ops/ beside _ops.py": (lambda path, evil: os.symlink(evil, path / "_ops"),
                                             "_ops was added \\(a link\\)"),
    "a folder _ops/ beside _ops.py": (lambda path, evil: shutil.copytree(evil, path / "_ops"),
                                      "_ops was added \\(a folder\\)"),
    "a __pycache__ with a .pyc": (plant_pyc, "__pycache__ was added \\(a folder\\)"),
    "a .pth file": (lambda path, evil: (path / "evil.pth").write_text(f"import sys; sys.path[:0] = [{str(evil)!r}]\n"),
                    "evil.pth was added"),
    "an empty folder": (lambda path, evil: (path / "empty").mkdir(), "empty was added \\(a folder\\)"),
    "a fifo": (lambda path, evil: os.mkfifo(path / "pipe"), "pipe was added \\(a fifo, socket or device\\)"),
    "a link to a file": (lambda path, evil: (path / "extra.py").symlink_to(evil / "__init__.py"),
                         "extra.py was added \\(a link\\)"),
}


def entries(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))


@pytest.mark.parametrize("plant", list(PLANTS))
def test_a_planted_entry_is_refused_and_the_variant_fetched_again(hub, planted, plant):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    listed = entries(path)
    put, message = PLANTS[plant]
    put(path, planted)
    new_process()
    with pytest.warns(UserWarning, match=f"{message} after it was downloaded and verified; fetched it again"):
        module = get_kernel("org/tiny@v1", hub=str(hub))
    assert module.double(1) == 2 and module.ops != "planted"
    assert not (planted.parent / "ran").exists()
    assert entries(path) == listed  # the planted entry went with the refused copy


def test_a_linked_folder_is_refused_when_the_marker_is_gone_too(hub, planted):
    """No marker: the copy is re-verified against its digest, and the exact set is checked first."""
    path = install_kernel("org/tiny@v1", hub=str(hub))
    path.with_name(path.name + ".verified").unlink()
    os.symlink(planted, path / "_ops")
    new_process()
    with pytest.warns(UserWarning, match="_ops was added \\(a link\\).*fetched it again"):
        assert get_kernel("org/tiny@v1", hub=str(hub)).ops != "planted"
    assert not (planted.parent / "ran").exists()


def test_a_linked_folder_in_a_copy_from_an_http_hub_is_refused(tmp_path, kernel, planted, monkeypatch):
    served, stop = start_server(tmp_path / "served")
    try:
        monkeypatch.setenv("HF_TOKEN", served.token)
        kernel.publish(served.url)
        monkeypatch.delenv("HF_TOKEN")
        path = install_kernel("org/tiny@v1", hub=served.url)
        os.symlink(planted, path / "_ops")
        new_process()
        with pytest.warns(UserWarning, match="_ops was added \\(a link\\).*fetched it again"):
            assert get_kernel("org/tiny@v1", hub=served.url, trust_remote_code=True).ops != "planted"
        assert not (planted.parent / "ran").exists()
    finally:
        stop()


def test_the_import_never_picks_a_linked_folder_over_the_verified_module(kernel, planted):
    """A local build is checked against its digest, which a linked folder is not part of (the
    file rule never enters one): the import still takes `_ops.py`, the verified file."""
    variant = kernel.variant("torch-cpu")
    os.symlink(planted, variant / "_ops")
    module = get_local_kernel(variant, backend="cpu")
    assert module.ops != "planted" and module.double(2) == 4
    assert sys.modules[module.__name__ + "._ops"].__file__ == str(variant.resolve() / "_ops.py")
    assert not (planted.parent / "ran").exists()


def test_a_submodule_without_a_verified_file_is_not_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .extra import X\n")
    (package / "extra.py").write_text("X = 1\n")
    with pytest.raises(ModuleNotFoundError, match="'_pkg_unverified.extra': no verified file of"):
        import_package("_pkg_unverified", package, files=[package / "__init__.py"])
    assert "_pkg_unverified" not in sys.modules
    assert import_package("_pkg_verified", package, files=[package / "__init__.py", package / "extra.py"]).X == 1
