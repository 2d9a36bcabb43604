"""The loader on kernels 0.19's zip build layout (`"build-layout": "zip"`: the package in
`<variant>/<id>.zip`, `__init__.py` at its root, what is not Python beside it) and on
`kernels-minver`, with hand-made Python-only variants (a built kernel's zip variant is loaded in
tests/integration/test_hf_loader_formats.py)."""

from __future__ import annotations

import importlib.resources
import json
import py_compile
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from kbuild import IntegrityError, digest_tree
from kbuild.errors import InvalidMetadata, KernelNotFound, NoVariantFits
from kbuild.loading import find_variant, judge_folder, load_variant
from kbuild.variants import SystemInfo

CPU = SystemInfo((2, 14), "cpu", None, "x86_64", "linux")
ID = "_zipdemo_cpu_abc1234"

# __init__ imports a module of the zip and one beside it (where a compiled library would lie), so
# a wrong search order or package setup fails loudly
ZIPPED = {
    "__init__.py": "from ._ops import NAMESPACE\nfrom . import _beside\nfrom .layers import Scale\n",
    "_ops.py": "NAMESPACE = __name__.rpartition('.')[0]\n",
    "layers/__init__.py": "class Scale:\n    factor = 2\n",
    "data/table.txt": "1 2 3\n",
}
BESIDE = {"_beside.py": "WHERE = __file__\n"}


def make_zip_variant(build: Path, variant: str = "torch-cpu", *, zipped: dict | None = None, extra: dict | None = None,
                     meta: dict | None = None) -> Path:
    root = build / variant
    root.mkdir(parents=True)
    with zipfile.ZipFile(root / f"{ID}.zip", "w") as archive:
        for name, text in (zipped or ZIPPED).items():
            archive.writestr(name, text)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    for name, text in BESIDE.items():
        (root / name).write_text(text)
    record = {"id": ID, "name": "zipdemo", "version": 1, "license": "Apache-2.0", "python-depends": [],
              "backend": {"type": "cpu"}, "build-layout": "zip", "kernels-minver": "0.19.0",
              "digest": {"algorithm": "sha256", "files": digest_tree(root)}, **(meta or {})}
    (root / "metadata.json").write_text(json.dumps(record))
    return root


@pytest.fixture(autouse=True)
def clean_modules(tmp_path):
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name == ID or name.startswith(ID + "."):
            del sys.modules[name]


def test_a_zip_layout_imports_from_the_archive_and_the_folder_beside_it(tmp_path):
    variant = make_zip_variant(tmp_path / "build")
    module = load_variant(variant)
    assert module.__name__ == ID
    assert module.__file__ == f"{variant / ID}.zip/__init__.py"  # as kernels 0.19 sets it
    assert module.NAMESPACE == ID
    assert module._beside.WHERE == str(variant / "_beside.py")
    assert module.Scale.factor == 2 and module.layers.__file__ == f"{variant / ID}.zip/layers/__init__.py"
    # a kernel's data files come from the archive too
    assert importlib.resources.files(module).joinpath("data/table.txt").read_text() == "1 2 3\n"
    assert load_variant(variant) is module  # once per process


def test_a_zip_layout_is_chosen_like_any_variant(tmp_path):
    make_zip_variant(tmp_path / "build")
    make_zip_variant(tmp_path / "build", "torch-cuda")
    assert find_variant(tmp_path, CPU) == (tmp_path / "build" / "torch-cpu").resolve()


def test_the_archive_is_verified_before_anything_runs(tmp_path):
    variant = make_zip_variant(tmp_path / "build")
    with zipfile.ZipFile(variant / f"{ID}.zip", "a") as archive:
        archive.writestr("_tampered.py", "raise SystemExit('tampered')\n")
    with pytest.raises(IntegrityError, match=f"{ID}.zip does not match metadata.json's digest"):
        load_variant(variant)
    assert ID not in sys.modules


def test_bytecode_in_the_archive_never_runs(tmp_path):
    # a planted .pyc with no source: zipimport would import it, kbuild compiles sources only
    source = tmp_path / "planted.py"
    source.write_text("PLANTED = True\n")
    compiled = py_compile.compile(str(source), cfile=str(tmp_path / "planted.pyc"))
    zipped = {**ZIPPED, "__init__.py": ZIPPED["__init__.py"] + "from . import planted\n"}
    variant = make_zip_variant(tmp_path / "build", zipped=zipped, extra={"planted.pyc": Path(compiled).read_bytes()})
    with pytest.raises(ImportError, match="planted"):
        load_variant(variant)


def test_a_zip_layout_without_its_archive_is_named(tmp_path):
    variant = make_zip_variant(tmp_path / "build")
    (variant / f"{ID}.zip").unlink()
    with pytest.raises(KernelNotFound, match=f"has the zip build layout and no {ID}.zip"):
        load_variant(variant, verify=False)


def test_an_unknown_layout_is_one_line(tmp_path):
    variant = make_zip_variant(tmp_path / "build", meta={"build-layout": "tar"})
    with pytest.raises(InvalidMetadata, match='`build-layout` must be "files" or "zip", got "tar"'):
        load_variant(variant)


def test_a_variant_needing_a_newer_format_is_refused_in_the_trace(tmp_path):
    """kernels-minver above the formats kbuild reads (kernels 0.19.1's): that variant is rejected
    with the reason and the next one that fits loads; none left is NoVariantFits saying so."""
    make_zip_variant(tmp_path / "build", meta={"kernels-minver": "0.20.0"})
    make_zip_variant(tmp_path / "build", "torch-universal", meta={"kernels-minver": "0.19.1"})
    trace = judge_folder(tmp_path / "build", CPU)
    assert [c.name for c in trace if c.accepted] == ["torch-universal"]
    (newer,) = [c for c in trace if not c.accepted]
    assert newer.reason == ("needs a loader of kernels >= 0.20.0's formats (kernels-minver); this kbuild reads those "
                            "of kernels 0.19.1: upgrade kbuild")
    assert find_variant(tmp_path, CPU).name == "torch-universal"
    shutil.rmtree(tmp_path / "build" / "torch-universal")
    with pytest.raises(NoVariantFits, match="upgrade kbuild"):
        find_variant(tmp_path, CPU)


def test_a_bad_kernels_minver_is_one_line(tmp_path):
    variant = make_zip_variant(tmp_path / "build", meta={"kernels-minver": "soon"})
    with pytest.raises(InvalidMetadata, match='`kernels-minver` must be a version such as "0.19.0", got "soon"'):
        load_variant(variant)


def test_a_0_19_name_in_the_nested_layout_is_found_and_loaded(tmp_path):
    """The issue's other refusal: a variant named in kernels 0.19's form, its package in
    `<variant>/<name>/__init__.py` (kernel-builder's nested layout)."""
    name = "torch-stable-abi-2.10-cpu-cpython-3.9-abi3-x86_64-linux"
    root = tmp_path / "build" / name
    (root / "nested_demo").mkdir(parents=True)
    (root / "nested_demo" / "__init__.py").write_text("from ._ops import NAMESPACE\n")
    (root / "nested_demo" / "_ops.py").write_text(ZIPPED["_ops.py"])
    record = {"id": "_nested_demo_cpu_1234567", "name": "nested-demo", "version": 1, "license": "MIT",
              "python-depends": [], "backend": {"type": "cpu"},
              "digest": {"algorithm": "sha256", "files": digest_tree(root)}}
    (root / "metadata.json").write_text(json.dumps(record))
    legacy = make_zip_variant(tmp_path / "build", "torch213-cxx11-cpu-x86_64-linux")  # the wrong torch here
    found = find_variant(tmp_path, CPU)
    assert found == root.resolve()
    trace = judge_folder(tmp_path / "build", CPU)
    assert [c.name for c in trace] == [name, legacy.name]
    module = load_variant(found)
    try:
        assert module.__name__ == "_nested_demo_cpu_1234567" and module.NAMESPACE == module.__name__
        assert module.__file__ == str(root / "nested_demo" / "__init__.py")
    finally:
        for key in [k for k in sys.modules if k.startswith("_nested_demo_cpu_1234567")]:
            del sys.modules[key]
