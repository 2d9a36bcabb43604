"""The local loader on hand-made Python-only variants: choice, digests, errors, import names."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import sys
from pathlib import Path

import pytest

import kbuild
from kbuild import IntegrityError, VariantMetadata, digest_tree, verify_tree
from kbuild.loading import find_variant, load_variant
from kbuild.local import get_local_kernel
from kbuild.variants import SystemInfo

CUDA130 = SystemInfo((2, 14), "cuda", (13, 0), "x86_64", "linux")
CPU = SystemInfo((2, 14), "cpu", None, "x86_64", "linux")

KBUILD_PROVENANCE = {"kernel-builder": {"name": "kbuild", "version": "0.1.0", "commit": "0" * 40, "dirty": False},
                     "kernel": {"commit": "1" * 40, "dirty": False}}

# __init__ imports its sibling relatively, so a wrong package setup fails loudly.
INIT = "from ._ops import NAMESPACE\nfrom . import _ops\nVARIANT = {variant!r}\n"
OPS = "NAMESPACE = __name__.rpartition('.')[0]\n"


def make_variant(build: Path, variant: str, *, id: str | None = "_demo_cuda_abc1234", name: str = "demo",
                 compat: bool = False, digest: bool = True, provenance: dict | None = KBUILD_PROVENANCE,
                 metadata: bool = True) -> Path:
    """A variant folder as the builder lays it out, for a Python-only kernel."""
    root = build / variant
    package = root / name.replace("-", "_") if compat else root
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(INIT.format(variant=variant))
    (package / "_ops.py").write_text(OPS)
    if metadata:
        meta = {"name": name, "version": 1, "license": "Apache-2.0", "python-depends": [],
                "backend": {"type": "cuda", "archs": []}}
        if id is not None:
            meta["id"] = id
        if digest:
            meta["digest"] = {"algorithm": "sha256", "files": digest_tree(root)}
        if provenance is not None:
            meta["provenance"] = provenance
        (root / "metadata.json").write_text(json.dumps(meta, indent=2))
    return root


@pytest.fixture(autouse=True)
def clean_modules(tmp_path):
    """Each test's imported kernels leave sys.modules with it (only those: removing a library
    such as torch that a test imported first would break the next import of it)."""
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        origin = getattr(sys.modules[name], "__file__", None) or ""
        if origin.startswith(str(tmp_path)):
            del sys.modules[name]


NAMES = [
    "torch213-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cpu-x86_64-linux",
    "torch-cuda",
    "torch-universal",
]


@pytest.fixture
def project(tmp_path):
    for n in NAMES:
        make_variant(tmp_path / "build", n)
    return tmp_path


# --- choosing ---------------------------------------------------------------------------------


def test_chooses_the_exact_compiled_build(project):
    chosen = project / "build" / "torch214-cxx11-cu130-x86_64-linux"
    assert find_variant(project, CUDA130) == chosen
    assert find_variant(project / "build", CUDA130) == chosen  # the build folder itself


def test_stable_abi_beats_compiled(project):
    make_variant(project / "build", "torch-stable-abi210-cu130-x86_64-linux")
    assert find_variant(project, CUDA130).name == "torch-stable-abi210-cu130-x86_64-linux"


def test_cpu_backend_picks_the_cpu_build(project):
    assert find_variant(project, CPU).name == "torch214-cxx11-cpu-x86_64-linux"


def test_falls_back_to_noarch_then_universal(tmp_path):
    make_variant(tmp_path / "build", "torch-universal")
    make_variant(tmp_path / "build", "torch-cuda")
    assert find_variant(tmp_path, CUDA130).name == "torch-cuda"
    assert find_variant(tmp_path, CPU).name == "torch-universal"


def test_a_variant_folder_given_directly(project):
    variant = project / "build" / "torch-cuda"
    assert find_variant(variant, CUDA130) == variant
    with pytest.raises(FileNotFoundError, match="built for cuda, this system uses cpu"):
        find_variant(variant, CPU)


def test_no_fit_lists_every_variant_with_its_reason(tmp_path):
    build = tmp_path / "build"
    for n in ["torch213-cxx11-cu130-x86_64-linux", "torch214-cxx11-cu126-x86_64-linux",
              "torch214-cxx11-cu130-aarch64-linux", "torch-rocm"]:
        make_variant(build, n)
    (build / "notes").mkdir()
    with pytest.raises(FileNotFoundError) as err:
        find_variant(tmp_path, CUDA130)
    message = str(err.value)
    assert str(build) in message
    assert CUDA130.describe() in message
    lines = message.splitlines()[1:]
    assert lines == [
        "  notes: rejected (not a variant name)",
        "  torch-rocm: rejected (built for rocm, this system uses cuda)",
        "  torch213-cxx11-cu130-x86_64-linux: rejected (built for torch 2.13, this is torch 2.14)",
        "  torch214-cxx11-cu126-x86_64-linux: rejected (built for CUDA 12.6, this torch uses CUDA 13.0)",
        "  torch214-cxx11-cu130-aarch64-linux: rejected (built for aarch64-linux, this is x86_64-linux)",
    ]


def test_missing_or_empty_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        find_variant(tmp_path / "nowhere", CUDA130)
    (tmp_path / "build").mkdir()
    with pytest.raises(FileNotFoundError, match="no kernel variants in"):
        find_variant(tmp_path, CUDA130)


# --- loading ----------------------------------------------------------------------------------


def test_loads_under_its_id_with_working_relative_imports(project):
    module = load_variant(find_variant(project, CUDA130))
    assert module.__name__ == "_demo_cuda_abc1234"
    assert sys.modules["_demo_cuda_abc1234"] is module
    assert module.VARIANT == "torch214-cxx11-cu130-x86_64-linux"
    assert module.NAMESPACE == "_demo_cuda_abc1234"
    assert sys.modules["_demo_cuda_abc1234._ops"] is module._ops


def test_memoised_per_folder(project):
    variant = find_variant(project, CUDA130)
    first = load_variant(variant)
    assert load_variant(variant) is first
    # The same id from another folder would register its ops twice: refused.
    with pytest.raises(ImportError, match="already loaded from"):
        load_variant(project / "build" / "torch-cuda")


def test_two_ids_load_side_by_side(tmp_path):
    a = make_variant(tmp_path / "a" / "build", "torch-cuda", id="_demo_cuda_1111111")
    b = make_variant(tmp_path / "b" / "build", "torch-cuda", id="_demo_cuda_2222222")
    ma, mb = load_variant(a), load_variant(b)
    assert ma is not mb
    assert (ma.NAMESPACE, mb.NAMESPACE) == ("_demo_cuda_1111111", "_demo_cuda_2222222")
    assert ma._ops is not mb._ops


def test_compat_layout(tmp_path):
    variant = make_variant(tmp_path / "build", "torch-cuda", name="my-kernel", compat=True)
    module = load_variant(variant)
    assert Path(module.__file__) == variant / "my_kernel" / "__init__.py"
    assert module.NAMESPACE == "_demo_cuda_abc1234"


def test_kernel_builder_build_without_id_or_digest(tmp_path):
    kb = {"kernel-builder": {"version": "0.9", "commit": "2" * 40, "dirty": False}}
    a = make_variant(tmp_path / "a", "torch-cuda", id=None, digest=False, provenance=kb, compat=True)
    b = make_variant(tmp_path / "b", "torch-cuda", id=None, digest=False, provenance=None, compat=True)
    ma, mb = load_variant(a), load_variant(b)
    # Named after the package plus the folder, so two copies still load apart.
    assert ma.__name__.startswith("_demo_") and mb.__name__.startswith("_demo_")
    assert ma.__name__ != mb.__name__
    assert load_variant(a) is ma


def test_old_build_without_metadata(tmp_path):
    variant = make_variant(tmp_path / "build", "torch-universal", name="old-kernel", compat=True, metadata=False)
    module = load_variant(variant)
    assert module.__name__.startswith("_old_kernel_")
    assert module.VARIANT == "torch-universal"


def test_hub_cache_layout_of_linked_files(tmp_path):
    """The Hugging Face cache links every snapshot file to a blob elsewhere."""
    built = make_variant(tmp_path / "built", "torch-cuda")
    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshot" / "build" / "torch-cuda"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for f in built.iterdir():
        (blobs / f.name).write_bytes(f.read_bytes())
        (snapshot / f.name).symlink_to(blobs / f.name)
    module = load_variant(find_variant(tmp_path / "snapshot", CUDA130))
    assert module.NAMESPACE == "_demo_cuda_abc1234"
    assert load_variant(snapshot) is module


def test_variant_without_a_package(tmp_path):
    variant = tmp_path / "build" / "torch-cuda"
    variant.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="neither __init__.py nor"):
        load_variant(variant)


def test_a_failed_import_leaves_nothing_behind(tmp_path):
    variant = make_variant(tmp_path / "build", "torch-cuda", digest=False, provenance=None)
    (variant / "_ops.py").write_text("raise RuntimeError('broken kernel')\n")
    with pytest.raises(RuntimeError, match="broken kernel"):
        load_variant(variant)
    assert not any(m.startswith("_demo_cuda_abc1234") for m in sys.modules)


# --- digests ----------------------------------------------------------------------------------


def test_tampered_file_is_refused_before_import(project):
    variant = find_variant(project, CUDA130)
    (variant / "_ops.py").write_text(OPS + "import os  # injected\n")
    with pytest.raises(IntegrityError, match=r"torch214-cxx11-cu130-x86_64-linux: _ops.py does not match"):
        load_variant(variant)
    assert "_demo_cuda_abc1234" not in sys.modules
    assert load_variant(variant, verify=False).NAMESPACE == "_demo_cuda_abc1234"


def test_added_and_missing_files_are_refused(tmp_path):
    variant = make_variant(tmp_path / "build", "torch-cuda")
    expected = VariantMetadata.for_variant(variant).digest
    (variant / "extra.py").write_text("")
    with pytest.raises(IntegrityError, match="extra.py is not listed"):
        verify_tree(variant, expected)
    (variant / "extra.py").unlink()
    (variant / "_ops.py").unlink()
    with pytest.raises(IntegrityError, match="_ops.py is listed in metadata.json's digest but missing"):
        verify_tree(variant, expected)


def test_digest_skips_metadata_and_bytecode(tmp_path):
    (tmp_path / "pkg" / "__pycache__").mkdir(parents=True)
    (tmp_path / "pkg" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (tmp_path / "stray.pyc").write_bytes(b"\0")
    (tmp_path / "metadata.json").write_text("{}")
    (tmp_path / "pkg" / "metadata.json").write_text("{}")  # only the root one is excluded
    (tmp_path / "a.py").write_bytes(b"")
    digests = digest_tree(tmp_path)
    assert list(digests) == ["a.py", "pkg/metadata.json"]
    # sha256 of no bytes, standard base64 with padding.
    assert digests["a.py"] == "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
    verify_tree(tmp_path, digests)


def test_importing_leaves_the_digest_valid_and_writes_no_bytecode(project, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)  # in case PYTHONDONTWRITEBYTECODE is set
    variant = find_variant(project, CUDA130)
    load_variant(variant)
    assert not (variant / "__pycache__").exists()
    verify_tree(variant, VariantMetadata.for_variant(variant).digest)


@pytest.mark.parametrize("module", ["__init__", "_ops"])
def test_planted_bytecode_is_never_imported(tmp_path, module):
    """A .pyc whose header matches the verified source (same size, same mtime) is what Python's
    own loader would import instead of it; the digest does not cover bytecode, so it must not run."""
    variant = make_variant(tmp_path / "build", "torch-cuda")
    source = variant / f"{module}.py"
    real = source.read_text()
    evil = real.replace("NAMESPACE", "PLANTED__", 1) if module == "_ops" else real.replace("'torch-cuda'", "'planted!!!'")
    assert len(evil) == len(real) and evil != real
    planted_src = tmp_path / f"{module}_planted.py"
    planted_src.write_text(evil)
    st = source.stat()
    os.utime(planted_src, ns=(st.st_atime_ns, st.st_mtime_ns))
    py_compile.compile(str(planted_src), cfile=importlib.util.cache_from_source(str(source)), doraise=True)
    loaded = load_variant(variant)
    assert loaded.VARIANT == "torch-cuda" and loaded.NAMESPACE == loaded.__name__
    assert not hasattr(loaded._ops, "PLANTED__")


# --- metadata.json ----------------------------------------------------------------------------


def write_meta(tmp_path, text):
    path = tmp_path / "metadata.json"
    path.write_text(text if isinstance(text, str) else json.dumps(text))
    return path


def test_metadata_fields(tmp_path):
    variant = make_variant(tmp_path, "torch-cuda", name="my-kernel")
    meta = VariantMetadata.for_variant(variant)
    assert (meta.name, meta.python_name, meta.id, meta.version) == ("my-kernel", "my_kernel", "_demo_cuda_abc1234", 1)
    assert meta.backend == kbuild.metadata.BackendInfo("cuda", ())
    assert meta.python_depends == ()
    assert set(meta.digest) == {"__init__.py", "_ops.py"}


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", r"metadata.json: not valid JSON \(line 1"),
        ([], "`top level` must be a JSON object"),
        ({"provenance": KBUILD_PROVENANCE}, "`id` is missing"),
        ({"id": "_x", "provenance": KBUILD_PROVENANCE}, "`digest` is missing"),
        ({"id": "not-an-identifier"}, "`id` must be a Python identifier"),
        ({"version": "1"}, '`version` must be an integer, got "1"'),
        ({"version": True}, "`version` must be an integer"),
        ({"python-depends": ["einops", 3]}, "`python-depends` must be a list of strings"),
        ({"kernel-depends": ["org/dep"]}, r"`kernel-depends\[0\]` must be an object"),
        ({"kernel-depends": [{"version": 1}]}, r"`kernel-depends\[0\].repo-id` is missing"),
        ({"kernel-depends": [{"repo-id": "org/dep"}]}, r"`kernel-depends\[0\]` must be pinned by exactly one"),
        ({"backend": {"type": "gpu"}}, "`backend.type` must be one of"),
        ({"backend": {"archs": []}}, "`backend.type` is missing"),
        ({"digest": {"algorithm": "md5", "files": {}}}, '`digest.algorithm` must be "sha256"'),
        ({"digest": {"algorithm": "sha256", "files": {"a": 1}}}, "`digest.files` must be"),
    ],
)
def test_malformed_metadata_names_file_and_field(tmp_path, content, message):
    path = write_meta(tmp_path, content)
    with pytest.raises(ValueError, match=message) as err:
        VariantMetadata.from_file(path)
    assert str(path) in str(err.value)


def with_dependencies(variant: Path, init: str, *pins: dict) -> Path:
    (variant / "__init__.py").write_text(init)
    meta = json.loads((variant / "metadata.json").read_text())
    meta["kernel-depends"] = list(pins)
    (variant / "metadata.json").write_text(json.dumps(meta))
    return variant


def test_kernel_dependencies_are_loaded_first_and_served_to_get_kernel_dep(tmp_path, monkeypatch):
    # the kernel takes them from Hugging Face's kernels.get_kernel_dep while it imports, as it does
    # under that loader; LOCAL_KERNELS points the dependency's repo at a local build
    make_variant(tmp_path / "dep" / "build", "torch-cuda", id="_dep_cuda_abc1234", name="dep")
    top = make_variant(tmp_path / "top" / "build", "torch-cuda", id="_top_cuda_abc1234", name="top",
                       digest=False, provenance=None)
    with_dependencies(top, "from kernels import get_kernel_dep\nDEP = get_kernel_dep('org/dep')\n",
                      {"repo-id": "org/dep", "version": 1})
    assert VariantMetadata.for_variant(top).kernel_depends == (kbuild.kernel_deps.KernelPin("org/dep", 1),)
    monkeypatch.setenv("LOCAL_KERNELS", f"org/dep={tmp_path / 'dep'}")
    loaded = get_local_kernel(tmp_path / "top")
    assert loaded.DEP.VARIANT == "torch-cuda" and loaded.DEP.__name__ == "_dep_cuda_abc1234"


def test_a_kernel_dependency_that_cannot_load_is_named(tmp_path, monkeypatch):
    top = make_variant(tmp_path / "top" / "build", "torch-cuda", id="_top2_cuda_abc1234", name="top",
                       digest=False, provenance=None)
    with_dependencies(top, "raise AssertionError('never imported')\n", {"repo-id": "org/gone", "revision": "main"})
    monkeypatch.setenv("LOCAL_KERNELS", f"org/gone={tmp_path / 'nothing-here'}")
    with pytest.raises(ImportError, match=r"top/build/torch-cuda: its kernel dependency org/gone@main could not "
                                          r"be loaded: no kernel at .*nothing-here"):
        get_local_kernel(tmp_path / "top")


def test_a_project_that_was_never_built_says_so(tmp_path):
    (tmp_path / "build.toml").write_text("[general]\n")
    with pytest.raises(FileNotFoundError, match=r"kernel project without a build/ folder; build it first "
                                                r"\(kbuild build "):
        get_local_kernel(tmp_path)


def test_metadata_tolerates_kernel_builder_fields(tmp_path):
    meta = VariantMetadata.from_file(write_meta(tmp_path, {"python-depends": [], "version": 1, "channel": "x"}))
    assert (meta.id, meta.digest, meta.name) == (None, None, None)


def test_get_local_kernel_with_the_running_torch(tmp_path):
    system = pytest.importorskip("kbuild.variants").detect_system()
    name = system.compiled_variant().name
    make_variant(tmp_path / "build", name)
    make_variant(tmp_path / "build", "torch-universal", id="_demo_universal_abc1234")
    module = get_local_kernel(tmp_path)
    assert module.VARIANT == name
    assert get_local_kernel(tmp_path) is module
