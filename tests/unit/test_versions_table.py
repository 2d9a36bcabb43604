"""builder/versions.toml has one reader (builder/toolchains/versions.py): the matrix the planner
builds for and the toolchains the store installs come from the same parse of the same file."""

from __future__ import annotations

from builder.plan.matrix import full_matrix, select
from builder.toolchains.versions import load_versions_table

TABLE = """
[default]
torch = ["2.14"]
cuda = ["13.2"]

[torch."2.14"]
version = "2.14.7"
cuda = ["13.2"]

[cuda."13.2"]
toolkit = "cuda-toolkit[nvcc]==13.2.99"
archs = ["9.0", "12.0"]

[sysroot]
requirement = "ziglang==9.9.9"
"""


def test_the_matrix_and_the_store_read_the_same_table(tmp_path):
    path = tmp_path / "versions.toml"
    path.write_text(TABLE)
    table = load_versions_table(path)
    matrix = select(None, path=path)
    assert [t.version for t in matrix.torch] == [table["torch"]["2.14"]["version"]] == ["2.14.7"]
    assert [c.toolkit for c in matrix.releases("cuda")] == [table["cuda"]["13.2"]["toolkit"]]
    assert table["sysroot"]["requirement"] == "ziglang==9.9.9"


def test_kbuild_own_table_is_the_default_of_both():
    table = load_versions_table()
    matrix = full_matrix()
    assert {f"{t.series[0]}.{t.series[1]}": t.version for t in matrix.torch} == \
        {series: body["version"] for series, body in table["torch"].items()}
    assert {f"{c.version[0]}.{c.version[1]}": c.toolkit for c in matrix.releases("cuda")} == \
        {series: body["toolkit"] for series, body in table["cuda"].items()}
    assert "requirement" in table["sysroot"] and table["cutlass"]["releases"]


def test_the_readme_states_the_shipped_default_matrix(monkeypatch):
    """README's "The matrix" section names the default matrix as builder/versions.toml has it."""
    monkeypatch.setenv("KBUILD_VERSIONS", "off")  # kbuild's own table, whatever this user overlays
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    found = re.search(r"its `\[default\]` is torch \{([^}]*)\} × CUDA\s+\{([^}]*)\}", readme)
    assert found, "README.md: the matrix section no longer states the default matrix"
    default = load_versions_table()["default"]
    assert [t.strip() for t in found[1].split(",")] == default["torch"]
    assert [c.strip() for c in found[2].split(",")] == default["cuda"]
    for series in default["torch"]:  # a release built for fewer CUDA versions says which
        cuda = load_versions_table()["torch"][series]["cuda"]
        if cuda != default["cuda"]:
            assert f"torch {series} with CUDA {' and '.join(cuda)} alone" in " ".join(readme.split())
