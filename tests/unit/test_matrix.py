"""builder.plan.matrix: the versions table, a workspace's choice from it, and each kernel's variants
with their toolchains (pure: the table is read from a file, nothing is installed)."""

from __future__ import annotations

import textwrap

import pytest

from builder.plan.matrix import full_matrix, matrix_variants, select, variant_archs
from kbuild_common.errors import ManifestError
from plan_inputs import COMPILED, write_kernel

TABLE = """\
[default]
torch = ["2.13", "2.14"]
cuda = ["13.0", "13.2"]

[torch."2.12"]
version = "2.12.0"
cuda = ["13.0"]

[torch."2.13"]
version = "2.13.0"
cuda = ["13.0", "13.2"]

[torch."2.14"]
version = "2.14.1"
cuda = ["13.0", "13.2"]

[cuda."13.0"]
toolkit = "cuda-toolkit[nvcc,cccl]==13.0.*"
archs = ["7.5", "8.0", "9.0", "12.0"]

[cuda."13.2"]
toolkit = "cuda-toolkit[nvcc,cccl]==13.2.*"
archs = ["7.5", "8.0", "9.0", "12.0"]
"""


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "versions.toml"
    path.write_text(TABLE)
    return path


def make(tmp_path, torch_extra="", cuda_extra="", general_extra="", backends='["cpu", "cuda"]'):
    toml = COMPILED.format(backends=backends, torch_extra=textwrap.dedent(torch_extra),
                           cuda_extra=textwrap.dedent(cuda_extra))
    if general_extra:
        toml = toml.replace("[torch]\n", f"{general_extra}\n[torch]\n", 1)
    return write_kernel(tmp_path / "k", toml)


def names(found):
    return [(mv.variant.name, str(mv.target)) for mv in found]


def test_default_matrix_and_toolchains(tmp_path, table):
    found, skips = matrix_variants(make(tmp_path), select(None, path=table))
    assert skips == []
    assert names(found) == [
        ("torch213-cxx11-cpu-x86_64-linux", "torch 2.13.0"),
        ("torch214-cxx11-cpu-x86_64-linux", "torch 2.14.1"),
        ("torch213-cxx11-cu130-x86_64-linux", "torch 2.13.0 + CUDA 13.0"),
        ("torch213-cxx11-cu132-x86_64-linux", "torch 2.13.0 + CUDA 13.2"),
        ("torch214-cxx11-cu130-x86_64-linux", "torch 2.14.1 + CUDA 13.0"),
        ("torch214-cxx11-cu132-x86_64-linux", "torch 2.14.1 + CUDA 13.2"),
    ]


def test_workspace_narrows_and_extends(tmp_path, table):
    m = make(tmp_path)
    found, _ = matrix_variants(m, select({"torch": ["2.12"], "cuda": ["13.0"]}, path=table))
    assert names(found) == [("torch212-cxx11-cpu-x86_64-linux", "torch 2.12.0"),
                            ("torch212-cxx11-cu130-x86_64-linux", "torch 2.12.0 + CUDA 13.0")]
    # A torch release whose CUDA list does not meet the chosen CUDA versions gets cpu only.
    found, _ = matrix_variants(m, select({"torch": ["2.12"], "cuda": ["13.2"]}, path=table))
    assert names(found) == [("torch212-cxx11-cpu-x86_64-linux", "torch 2.12.0")]


def test_manifest_filters(tmp_path, table):
    m = make(tmp_path, torch_extra='minver = "2.14"\n', general_extra='[general.cuda]\nmaxver = "13.0"\n')
    found, _ = matrix_variants(m, select(None, path=table))
    assert [n for n, _ in names(found)] == ["torch214-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux"]


def test_nothing_left_for_a_backend_is_a_skip_with_the_reason(tmp_path, table):
    m = make(tmp_path, general_extra='[general.cuda]\nminver = "13.4"\n')
    found, skips = matrix_variants(m, select(None, path=table))
    assert all(mv.variant.backend == "cpu" for mv in found)
    assert [(s.backend, s.reason) for s in skips] == [
        ("cuda", "no CUDA version of the matrix (13.0, 13.2) is inside [general.cuda] minver/maxver")]


def test_stable_abi_one_variant_per_cuda_against_the_newest_torch(tmp_path, table):
    m = make(tmp_path, torch_extra='stable-abi = "2.10"\n')
    found, _ = matrix_variants(m, select(None, path=table))
    assert names(found) == [
        ("torch-stable-abi210-cpu-x86_64-linux", "torch 2.14.1"),
        ("torch-stable-abi210-cu130-x86_64-linux", "torch 2.14.1 + CUDA 13.0"),
        ("torch-stable-abi210-cu132-x86_64-linux", "torch 2.14.1 + CUDA 13.2"),
    ]


def test_unbuildable_backend_is_skipped(tmp_path, table):
    m = make(tmp_path, backends='["cpu", "cuda", "metal"]')
    found, skips = matrix_variants(m, select({"torch": ["2.14"], "cuda": ["13.0"]}, path=table))
    assert [n for n, _ in names(found)] == ["torch214-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux"]
    assert skips[0].backend == "metal" and "cannot be compiled on this machine" in skips[0].reason


@pytest.mark.parametrize(("choice", "message"), [
    ({"torch": ["2.9"]}, '[workspace.matrix] torch: torch "2.9" is not in builder/versions.toml (known: 2.12, 2.13, 2.14)'),
    ({"cuda": "13.0"}, "[workspace.matrix] cuda: expected a list of versions like [\"2.14\"], got '13.0'"),
    ({"torch": ["two"]}, '[workspace.matrix] torch: expected a version like "2.14", got \'two\''),
    ({"python": ["3.11"]}, "[workspace.matrix] python: unknown key (expected one of: torch, cuda)"),
])
def test_bad_matrix_choice_is_one_line(table, choice, message):
    with pytest.raises(ManifestError) as e:
        select(choice, path=table)
    assert str(e.value) == message


def test_variant_archs_intersect_with_the_nvcc(tmp_path, table):
    m = make(tmp_path, cuda_extra='cuda-capabilities = ["8.0", "9.0", "10.0"]\n')
    cuda = {c.version: c for c in full_matrix(table).releases("cuda")}[(13, 2)]
    assert variant_archs(m, cuda) == ["8.0", "9.0"]


def test_the_shipped_table_has_the_default_matrix(monkeypatch):
    matrix = select(None)
    monkeypatch.setenv("KBUILD_VERSIONS", "off")  # kbuild's own table, whatever this user overlays
    assert [r.version for r in matrix.torch] == ["2.14.1", "2.15.0"]
    assert [c.version for c in matrix.releases("cuda")] == [(13, 0), (13, 2)]
    assert [c.version for c in matrix.toolkits_for("cuda", matrix.torch[-1])] == [(13, 2)]  # 2.15's PyPI wheel: cu132
