"""`kbuild check` reports every error a build.toml has, each on its own line with file:line (an
unknown table too), in file order; a workspace's members are all checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.commands.main import main
from builder.project.manifest import load_manifest
from kbuild_common.errors import ManifestError

# Each mistake on its own line, named by the line it is on: (line, [table] key, a fragment).
MANY_MISTAKES = """\
[general]
name = "Bad_Name"
version = "1"
edition = 5
backends = ["cpu", "gpu"]

[torch]
src = ["torch-ext/missing.cpp"]
minver = "2"

[kernal.relu]
backend = "cpu"

[kernel.relu]
backend = "cpu"
depends = ["torch", "nope"]
src = ["relu.cpp"]
cuda-flags = ["-O3"]
"""
EXPECTED = [
    (2, "[general] name", '"Bad_Name" is not a valid kernel name'),
    (3, "[general] version", "expected an integer, got '1'"),
    (5, "[general] backends", 'unknown backend "gpu"'),
    (8, "[torch] src", 'file not found: "torch-ext/missing.cpp"'),
    (9, "[torch] minver", 'expected a version like "2.10"'),
    (11, "[kernal]", "unknown table (expected one of: general, torch, torch-noarch, tvm-ffi, kernel)"),
    (16, "[kernel.relu] depends", 'unknown dependency "nope"'),
    (17, "[kernel.relu] src", 'file not found: "relu.cpp"'),
    (18, "[kernel.relu] cuda-flags", 'only valid for backend cuda, this kernel is "cpu"'),
]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("kbuild: error:")]


def test_check_prints_every_error_with_file_and_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "build.toml").write_text(MANY_MISTAKES)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "."]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    lines = error_lines(err)
    assert len(lines) == len(EXPECTED), err
    for line, (number, at, fragment) in zip(lines, EXPECTED, strict=True):
        assert line.startswith(f"kbuild: error: build.toml:{number}: {at}: "), line
        assert fragment in line, line


def test_the_error_holds_each_one_and_says_all_of_them(tmp_path):
    (tmp_path / "build.toml").write_text(MANY_MISTAKES)
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path)
    assert [e.line for e in caught.value.errors] == [n for n, _, _ in EXPECTED]
    assert str(caught.value).splitlines() == [str(e) for e in caught.value.errors]


def test_an_unknown_table_written_only_as_a_prefix_has_its_line(tmp_path, monkeypatch, capsys):
    """`[kernal.relu]` names the table `kernal` only as part of its header."""
    good = (Path(__file__).resolve().parents[1] / "manifests" / "good" / "edition5-compiled")
    text = (good / "build.toml").read_text()
    (tmp_path / "build.toml").write_text(text + "\n[kernal.relu]\nbackend = \"cpu\"\n")
    for rel in ("torch-ext", "relu_cpu", "relu_cuda"):
        if (good / rel).exists():
            (tmp_path / rel).symlink_to(good / rel)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "."]) == 2
    header = len(text.splitlines()) + 2
    assert error_lines(capsys.readouterr().err) == [
        f"kbuild: error: build.toml:{header}: [kernal]: unknown table "
        "(expected one of: general, torch, torch-noarch, tvm-ffi, kernel); did you mean kernel?"]


def test_a_bad_value_gives_one_line_not_one_per_check_that_needs_it(tmp_path, monkeypatch, capsys):
    """A [general] backends of the wrong type is not reported again as missing, nor does every
    kernel section then fail to match it."""
    (tmp_path / "build.toml").write_text(
        '[general]\nname = "relu"\nedition = 5\nbackends = "cpu"\n\n[torch-noarch]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", "."]) == 2
    assert error_lines(capsys.readouterr().err) == [
        "kbuild: error: build.toml:4: [general] backends: expected a list of strings, got 'cpu'"]


def test_check_of_a_workspace_reports_every_member(tmp_path, monkeypatch, capsys):
    (tmp_path / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n')
    for name, version in (("one", '"1"'), ("two", "2"), ("three", "true")):
        folder = tmp_path / "kernels" / name
        (folder / "torch-ext" / name).mkdir(parents=True)
        (folder / "torch-ext" / name / "__init__.py").write_text("")
        (folder / "build.toml").write_text(
            f'[general]\nname = "{name}"\nversion = {version}\nedition = 5\nbackends = ["cpu"]\n\n[torch-noarch]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", "."]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == ["kernels/two/build.toml: ok (two, backends cpu, torch-noarch)"]
    assert error_lines(err) == [
        "kbuild: error: kernels/one/build.toml:3: [general] version: expected an integer, got '1'",
        "kbuild: error: kernels/three/build.toml:3: [general] version: expected an integer, got True",
    ]
