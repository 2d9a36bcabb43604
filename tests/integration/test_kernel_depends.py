"""Dependencies of a kernel: what metadata.json records for each backend (kernel-builder's shape:
[general]'s python-depends and kernel-depends, then [general.<backend>]'s), and kernel
dependencies end to end: two kernels built and published with the real CLI, the one declaring
`kernel-depends` on the other and taking it from `kernels.get_kernel_dep` while it imports.
kbuild's get_kernel loads it from a local git hub; Hugging Face's kernels loads the same builds
from `kbuild hub serve` over HTTP. The kernels are Python-only: each builds in a fraction of a second."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from builder.commands.main import main
from kbuild import get_kernel
from kbuild.metadata import VariantMetadata
from runtime_hubs import git, new_process, runtime_env, start_server, torch_probes  # noqa: F401 (fixtures)

MANIFEST = """[general]
name = "{name}"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]
{depends}
[general.hub]
repo-id = "org/{name}"

[torch-noarch]
"""
TAKES_DEP = "from kernels import get_kernel_dep\n\nVALUE = get_kernel_dep({dep!r}).VALUE + 1\n"


def project(root: Path, name: str, init: str, depends: str = "") -> Path:
    package = root / name / "torch-ext" / name.replace("-", "_")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(init)
    (root / name / "build.toml").write_text(MANIFEST.format(name=name, depends=depends))
    (root / name / ".gitignore").write_text("build/\n.kbuild/\n")
    git(root / name, "init", "-q", "-b", "main")
    git(root / name, "add", "-A")
    git(root / name, "commit", "-q", "-m", "v1")
    assert main(["build", str(root / name)]) == 0
    return root / name


def depends_on(repo_id: str) -> str:
    return f'kernel-depends = [{{ repo-id = "{repo_id}", version = 1 }}]\n'


def metadata(root: Path, variant: str) -> dict:
    return json.loads((root / "build" / variant / "metadata.json").read_text())


PER_BACKEND = """upstream = "https://github.com/example/tiny"
python-depends = ["einops"]
kernel-depends = [{ repo-id = "kernels-community/activation", version = 1 }]

[general.cuda]
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "kernels-community/rotary", revision = "main" }]
"""


def test_each_backend_records_general_then_its_own_dependencies(tmp_path):
    root = project(tmp_path, "tiny", "VALUE = 1\n", PER_BACKEND)
    cpu, cuda = metadata(root, "torch-cpu"), metadata(root, "torch-cuda")
    assert cpu["python-depends"] == ["einops"]
    assert cuda["python-depends"] == ["einops", "nvidia-cutlass-dsl"]
    assert cpu["kernel-depends"] == [{"repo-id": "kernels-community/activation", "version": 1}]
    assert cuda["kernel-depends"] == [{"repo-id": "kernels-community/activation", "version": 1},
                                      {"repo-id": "kernels-community/rotary", "revision": "main"}]
    assert cpu["upstream"] == "https://github.com/example/tiny" and "source" not in cpu
    # the loader reads what the builder wrote
    assert VariantMetadata.for_variant(root / "build" / "torch-cuda").python_depends == ("einops", "nvidia-cutlass-dsl")


def test_a_kernel_without_dependencies_records_empty_lists(tmp_path):
    meta = metadata(project(tmp_path, "tiny", "VALUE = 1\n"), "torch-cuda")
    assert (meta["python-depends"], meta["kernel-depends"]) == ([], [])  # kernel-builder writes both, always
    assert "upstream" not in meta


@pytest.fixture
def kernels(tmp_path) -> list[Path]:
    """org/base (VALUE = 42) and org/top, which depends on it (VALUE = base's + 1)."""
    return [project(tmp_path, "base", "VALUE = 42\n"),
            project(tmp_path, "top", TAKES_DEP.format(dep="org/base"), depends_on("org/base"))]


def test_get_kernel_loads_the_dependency_first_from_the_same_hub(kernels, tmp_path, runtime_env):
    hub = tmp_path / "hub"
    for root in kernels:
        assert main(["publish", str(root), "--hub", str(hub)]) == 0
    top = get_kernel("org/top@v1", hub=str(hub))
    assert top.VALUE == 43
    new_process()  # a fresh process: both from the cache, the dependency again by its own pin (v1)
    assert get_kernel("org/top@v1", hub=str(hub), backend="cpu").VALUE == 43


def test_a_dependency_cycle_is_an_error_naming_it(tmp_path, runtime_env):
    hub = tmp_path / "hub"
    for name, dep in (("ping", "org/pong"), ("pong", "org/ping")):
        root = project(tmp_path, name, TAKES_DEP.format(dep=dep), depends_on(dep))
        assert main(["publish", str(root), "--hub", str(hub)]) == 0
    with pytest.raises(ImportError, match=r"cyclic kernel dependency org/ping -> org/pong -> org/ping"):
        get_kernel("org/ping@v1", hub=str(hub))


def test_hugging_face_kernels_loads_the_same_builds_over_http(kernels, tmp_path, monkeypatch):
    served, stop = start_server(tmp_path / "served")
    try:
        monkeypatch.setenv("HF_TOKEN", served.token)
        for root in kernels:
            assert main(["publish", str(root), "--hub", served.url]) == 0
        script = textwrap.dedent("""
            import kernels
            top = kernels.get_kernel("org/top", version=1, trust_remote_code=True)
            print("RESULT", top.VALUE)
        """)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
        env.update(HF_ENDPOINT=served.url, HF_HOME=str(tmp_path / "hf-home"))
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "RESULT 43" in done.stdout
        assert any("/kernels/org/base/resolve/" in r for r in served.requests())
    finally:
        stop()
