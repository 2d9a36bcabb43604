"""The overlay versions table: KBUILD_VERSIONS, else versions.toml in kbuild's config folder, read
through the settings cascade and merged over kbuild's own table, so a torch release newer than
this kbuild is planned from one file; every row keeps where it came from, and a bad overlay is one
line naming its file, line and key. Pure: files only."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.config.cascade import Setting
from builder.config.environment import versions_overlay
from builder.plan.matrix import full_matrix, matrix_variants, select
from builder.toolchains.versions import SOURCE, load_versions_table, read_table
from kbuild_common.errors import ManifestError
from plan_inputs import COMPILED, write_kernel

OVERLAY = """\
# torch 2.16, out after this kbuild
[default]
torch = ["2.15", "2.16"]

[torch."2.16"]
version = "2.16.0"
cuda = ["13.2"]
"""


@pytest.fixture
def overlay(tmp_path, monkeypatch):
    path = tmp_path / "versions.toml"
    path.write_text(OVERLAY)
    monkeypatch.setenv("KBUILD_VERSIONS", str(path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    return path


def kernel(tmp_path):
    toml = COMPILED.format(backends='["cpu", "cuda"]', torch_extra="", cuda_extra="")
    return write_kernel(tmp_path / "k", toml)


def test_a_made_up_release_plans_its_variants_and_says_where_its_row_came_from(tmp_path, overlay):
    matrix = select(None)  # the default matrix, as `kbuild build --all` and `kbuild matrix` take it
    assert [r.version for r in matrix.torch] == ["2.15.0", "2.16.0"]
    found, _ = matrix_variants(kernel(tmp_path), matrix)
    new = {mv.variant.name: mv.target for mv in found if mv.variant.name.startswith("torch216-")}
    assert sorted(new) == ["torch216-cxx11-cpu-x86_64-linux", "torch216-cxx11-cu132-x86_64-linux"]
    assert {t.torch.origin for t in new.values()} == {f"{overlay}:5 (KBUILD_VERSIONS)"}
    assert new["torch216-cxx11-cu132-x86_64-linux"].toolkit.origin.startswith(f"{SOURCE}:")  # CUDA 13.2: kbuild's own
    shipped = {r.series: r for r in full_matrix().torch}
    assert shipped[(2, 15)].origin.startswith(f"{SOURCE}:") and (2, 16) in shipped  # --variant may name it
    # the store reads the same merged table: the rest of kbuild's own is still there
    table = load_versions_table()
    assert table["torch"]["2.16"]["version"] == "2.16.0" and table["sysroot"]["requirement"]


def test_an_overlay_row_replaces_the_shipped_one_whole(tmp_path, monkeypatch):
    path = tmp_path / "o.toml"
    path.write_text('[torch."2.15"]\nversion = "2.15.1"\ncuda = ["13.0", "13.2"]\n')
    table = read_table(overlay=Setting(path, "KBUILD_VERSIONS"))
    assert table.data["torch"]["2.15"] == {"version": "2.15.1", "cuda": ["13.0", "13.2"]}
    assert table.origin("torch", "2.15") == f"{path}:1 (KBUILD_VERSIONS)"
    assert table.origin("torch", "2.14").startswith(f"{SOURCE}:")
    assert read_table(overlay=None).data["torch"]["2.15"]["version"] == "2.15.0"


def test_the_overlay_goes_through_the_cascade(tmp_path):
    user = tmp_path / "config" / "kbuild" / "versions.toml"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert versions_overlay(env) is None  # no variable, no file: kbuild's own table alone
    user.parent.mkdir(parents=True)
    user.write_text(OVERLAY)
    assert versions_overlay(env) == Setting(user, f"{user} (kbuild's config folder)")
    assert versions_overlay({**env, "KBUILD_VERSIONS": "/x/v.toml"}) == Setting(
        Path("/x/v.toml"), "KBUILD_VERSIONS")
    assert versions_overlay({**env, "KBUILD_VERSIONS": "off"}) is None  # off: not even the user's file
    found = read_table(overlay=versions_overlay(env))
    assert found.origin("torch", "2.16") == f"{user}:5 (kbuild's config folder)"


@pytest.mark.parametrize("text, message", [
    ('[torch."2.16"]\nversion = "2.16"\ncuda = ["13.2"]\n',
     '{path}:1 (KBUILD_VERSIONS): [torch."2.16"] version: expected the exact release, like "2.16.0", got \'2.16\''),
    ('[torch."2.16"]\nversion = "2.16.0"\n',
     '{path}:1 (KBUILD_VERSIONS): [torch."2.16"] cuda: expected a list of CUDA versions, like ["13.2"], got None'),
    ('\n[torch."2.16"]\nversion = "2.16.0"\ncuda = ["13.9"]\n',
     '{path}:2 (KBUILD_VERSIONS): [torch."2.16"] cuda: CUDA 13.9 has no [cuda."13.9"] table'),
    ('[cuda."13.9"]\narchs = ["9.0"]\n',
     '{path}:1 (KBUILD_VERSIONS): [cuda."13.9"] toolkit: expected a pip requirement of nvcc, like "cuda-toolkit[nvcc,cccl]==13.2.*", '
     'got None'),
    ('[torch.latest]\nversion = "2.16.0"\ncuda = []\n',
     '{path}:1 (KBUILD_VERSIONS): [torch."latest"]: expected a release like "2.16" as the key'),
    ('[toolchains]\nx = 1\n', '{path}: [toolchains]: unknown table (an overlay may hold torch, cuda, default, cutlass, '
     'sysroot)'),
    ('[torch."2.16"\n', '{path}: not a TOML versions table: '),
])
def test_a_bad_overlay_is_one_line_naming_its_file_line_and_key(tmp_path, monkeypatch, text, message):
    path = tmp_path / "o.toml"
    path.write_text(text)
    monkeypatch.setenv("KBUILD_VERSIONS", str(path))
    with pytest.raises(ManifestError) as err:
        full_matrix()  # what --variant, --all and kbuild matrix read
    assert str(err.value).startswith(message.format(path=path)), str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_overlay_names_what_named_it(tmp_path):
    with pytest.raises(ManifestError, match=r"^KBUILD_VERSIONS: .*/gone.toml: no such file \(expected a versions "
                                            r"table like builder/versions.toml, or unset it\)$"):
        read_table(overlay=Setting(tmp_path / "gone.toml", "KBUILD_VERSIONS"))
