"""A variant's metadata.json lists the dependencies kernel-builder would write for its backend:
[general]'s python-depends and kernel-depends, then those of [general.<backend>]. A Python-only
kernel builds one variant per backend in a fraction of a second, with the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from builder.cli import main
from kbuild.metadata import VariantMetadata

MANIFEST = """[general]
name = "tiny"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]
upstream = "https://github.com/example/tiny"
python-depends = ["einops"]
kernel-depends = [{ repo-id = "kernels-community/activation", version = 1 }]

[general.cuda]
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "kernels-community/rotary", revision = "main" }]

[torch-noarch]
"""


def test_each_backend_gets_general_then_its_own_dependencies(tmp_path: Path):
    root = tmp_path / "tiny"
    (root / "torch-ext" / "tiny").mkdir(parents=True)
    (root / "torch-ext" / "tiny" / "__init__.py").write_text("from ._ops import ops\n")
    (root / "build.toml").write_text(MANIFEST)
    assert main(["build", str(root)]) == 0
    cpu = json.loads((root / "build" / "torch-cpu" / "metadata.json").read_text())
    cuda = json.loads((root / "build" / "torch-cuda" / "metadata.json").read_text())
    assert cpu["python-depends"] == ["einops"]
    assert cuda["python-depends"] == ["einops", "nvidia-cutlass-dsl"]
    assert cpu["kernel-depends"] == [{"repo-id": "kernels-community/activation", "version": 1}]
    assert cuda["kernel-depends"] == [{"repo-id": "kernels-community/activation", "version": 1},
                                      {"repo-id": "kernels-community/rotary", "revision": "main"}]
    assert cpu["upstream"] == "https://github.com/example/tiny" and "source" not in cpu
    # the loader reads what the builder wrote
    assert VariantMetadata.for_variant(root / "build" / "torch-cuda").python_depends == ("einops", "nvidia-cutlass-dsl")


def test_a_kernel_without_dependencies_records_empty_lists(tmp_path: Path):
    root = tmp_path / "tiny"
    (root / "torch-ext" / "tiny").mkdir(parents=True)
    (root / "torch-ext" / "tiny" / "__init__.py").write_text("from ._ops import ops\n")
    manifest = "\n".join(line for line in MANIFEST.splitlines()
                         if not line.startswith(("python-depends", "kernel-depends", "upstream", "[general.cuda]")))
    (root / "build.toml").write_text(manifest + "\n")
    assert main(["build", str(root)]) == 0
    meta = json.loads((root / "build" / "torch-cuda" / "metadata.json").read_text())
    assert (meta["python-depends"], meta["kernel-depends"]) == ([], [])  # kernel-builder writes both, always
    assert "upstream" not in meta
