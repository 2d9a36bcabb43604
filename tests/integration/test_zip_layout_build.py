"""The zip build layout, build side (issue 44): an edition 6 kernel with `build-layout = "zip"` is
staged as `<id>.zip` holding its Python package (`__init__.py` at the root) with the library beside
it, metadata.json says so (`build-layout`, `kernels-minver`) and its digest covers the staged files;
the archive is the same bytes whatever the folder or the sources' times; `kbuild test` runs the
kernel's suite against the package in the archive, and `kbuild publish` reads its public names there;
Hugging Face's loader loads the build as it comes out (kernels 0.19.1) or refuses it in one line
(0.18.3)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

import hf_envs
from builder.commands.main import main
from cpu_kernel import write_cpu_kernel
from kbuild.digest import digest_tree
from tiny_kernel import build, commit, hub, kernel, publish, tree, write_kernel  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

SOURCE = 'extern "C" int zipped_probe(int x) { return x + 1; }\n'
PACKAGE = "from ._ops import ops\n\n\ndef probe():\n    return 1\n"
LAYERS = "class Probe:\n    pass\n"


def write_zip_kernel(root: Path) -> Path:
    """A CPU kernel written as edition 6, with a subpackage, in the zip layout."""
    write_cpu_kernel(root, "zipped", SOURCE, package=PACKAGE)
    toml = (root / "build.toml").read_text()
    toml = toml.replace("edition = 5\n", 'edition = 6\nbuild-layout = "zip"\n')
    toml = toml.replace('backend = "cpu"', 'language = "cpp-cpu"')
    (root / "build.toml").write_text(toml)
    (root / "torch-ext" / "zipped" / "layers").mkdir()
    (root / "torch-ext" / "zipped" / "layers" / "__init__.py").write_text(LAYERS)
    return root


def built_variant(project: Path) -> Path:
    (variant,) = [d for d in (project / "build").iterdir() if (d / "metadata.json").is_file()]
    return variant


def test_a_zip_layout_variant_holds_its_package_in_one_archive(tmp_path, capsys):
    project = write_zip_kernel(tmp_path / "zipped")
    assert main(["build", str(project)]) == 0, capsys.readouterr()
    variant = built_variant(project)
    metadata = json.loads((variant / "metadata.json").read_text())
    ops_id = metadata["id"]

    assert sorted(p.name for p in variant.iterdir()) == sorted(
        [f"{ops_id}.abi3.so", f"{ops_id}.zip", "metadata.json"])
    assert metadata["build-layout"] == "zip" and metadata["kernels-minver"] == "0.19.0"
    assert metadata["digest"]["files"] == digest_tree(variant)
    assert set(metadata["digest"]["files"]) == {f"{ops_id}.abi3.so", f"{ops_id}.zip"}

    with zipfile.ZipFile(variant / f"{ops_id}.zip") as z:
        infos = z.infolist()
        names = [i.filename for i in infos]
        assert names == sorted(names) == ["__init__.py", "_ops.py", "layers/__init__.py"]
        assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
        assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
        assert z.read("__init__.py").decode() == PACKAGE
        assert z.read("layers/__init__.py").decode() == LAYERS
        assert f"from . import {ops_id}" in z.read("_ops.py").decode()  # the library beside the archive


def test_the_archive_is_reproducible(tmp_path, capsys):
    """Another folder, other source times: the same archive, byte for byte, and the same digest."""
    first = write_zip_kernel(tmp_path / "one" / "zipped")
    second = write_zip_kernel(tmp_path / "two" / "zipped")
    for path in (second / "torch-ext").rglob("*"):
        os.utime(path, (1_700_000_000, 1_700_000_000))
    for project in (first, second):
        assert main(["build", str(project)]) == 0, capsys.readouterr()
    a, b = built_variant(first), built_variant(second)
    ops_id = json.loads((a / "metadata.json").read_text())["id"]
    assert (a / f"{ops_id}.zip").read_bytes() == (b / f"{ops_id}.zip").read_bytes()
    assert digest_tree(a) == digest_tree(b)

    # a rebuild with nothing changed keeps the staged folder as it is
    before = (a / f"{ops_id}.zip").stat().st_mtime_ns
    m1 = json.loads((a / "metadata.json").read_text())
    assert main(["build", str(first)]) == 0, capsys.readouterr()
    m2 = json.loads((a / "metadata.json").read_text())
    assert m1 == m2
    assert (a / f"{ops_id}.zip").stat().st_mtime_ns == before


SUITE = """import sys

import zipped
from zipped.layers import Probe


def test_the_package_comes_from_the_archive_and_the_library_from_beside_it():
    assert zipped.__file__.endswith(".zip/__init__.py") and zipped.probe() == 1 and Probe.__module__ == "zipped.layers"
    libraries = [m.__file__ for n, m in sys.modules.items() if n.startswith("zipped._zipped_cpu_")]
    assert len(libraries) == 1 and libraries[0].endswith(".abi3.so") and ".zip" not in libraries[0]
"""


def test_kbuild_test_imports_the_package_from_the_archive(tmp_path, capsys):
    project = write_zip_kernel(tmp_path / "zipped")
    (project / "tests").mkdir()
    (project / "tests" / "test_zipped.py").write_text(SUITE)
    assert main(["build", str(project)]) == 0, capsys.readouterr()
    assert main(["test", str(project)]) == 0, capsys.readouterr()
    assert "1 passed" in "".join(capsys.readouterr())


def in_zip_layout(root: Path) -> None:
    """tiny_kernel's project, as edition 6 in the zip layout."""
    text = (root / "build.toml").read_text()
    (root / "build.toml").write_text(text.replace("edition = 5\n", 'edition = 6\nbuild-layout = "zip"\n'))


def test_publish_reads_the_public_names_of_a_zip_layout_variant(kernel, hub, capsys):
    """Removing a public name is refused for a zip layout kernel too: the names are read from the
    archives, built and published."""
    write_kernel(kernel, names=("double", "triple"))
    in_zip_layout(kernel)
    commit(kernel)
    build(kernel)
    assert publish(kernel, hub)[0] == 0
    files = tree(hub, "v1")
    assert any(f.startswith("build/torch-cpu/") and f.endswith(".zip") for f in files), files
    assert "build/torch-cpu/__init__.py" not in files
    write_kernel(kernel, names=("double",))
    in_zip_layout(kernel)
    commit(kernel)
    build(kernel)
    code, output = publish(kernel, hub, capsys=capsys)
    assert code != 0 and "triple" in output and "new major" in output, output


LOAD = """
import sys
from pathlib import Path
import kernels
try:
    kernel = kernels.get_local_kernel(Path(sys.argv[1]))
except RuntimeError as e:
    print("refused:", e)
else:
    print("loaded:", kernel.__file__, kernel.double(21))
"""


def test_hugging_faces_loader_loads_the_zip_layout_build(kernel, capsys):
    """The build itself, not a repacked one: kernels 0.19.1 imports it from the archive (its digest
    checked); 0.18.3, which does not know the layout, refuses it for its kernels-minver."""
    try:
        pythons = {name: hf_envs.ensure(name) for name in ("kernels-0.18", "kernels-0.19")}
    except hf_envs.EnvError as e:
        pytest.fail(str(e))
    in_zip_layout(kernel)
    commit(kernel)
    build(kernel)
    said = {}
    for name, python in pythons.items():
        done = subprocess.run([str(python), "-c", LOAD, str(kernel)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        said[name] = done.stdout.strip()
    assert said["kernels-0.19"].startswith("loaded: ") and said["kernels-0.19"].endswith(".zip/__init__.py 42"), said
    assert "requires kernels>=0.19.0" in said["kernels-0.18"], said
