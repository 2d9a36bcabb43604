"""`kbuild test` of a kernel whose suite loads it through Hugging Face's `kernels.get_kernel`
(pointed at the variant under test by LOCAL_KERNELS): when the suite's Python lacks Hugging
Face's `kernels`, or finds something else under that name (a folder named kernels/ on its path,
imported as a namespace package, as the GPU machine of issue 53 did with the checkout's own
kernels/), kbuild says so in one line naming the Python and `pip install kernels`.

The Python without `kernels` is a real one: a venv whose packages are this environment's
(torch, pytest) but for Hugging Face's `kernels`, linked in one by one."""

from __future__ import annotations

import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

from builder.commands.main import main

pytest.importorskip("torch")

BUILD_TOML = """[general]
name = "hfk"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[general.hub]
repo-id = "org/hfk"

[torch-noarch]
"""
SUITE = '''import kernels

HFK = kernels.get_kernel("org/hfk", version=1)


def test_one():
    assert HFK.one() == 1
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    kernel = tmp_path_factory.mktemp("hfk") / "hfk"
    for rel, text in {"build.toml": BUILD_TOML, "torch-ext/hfk/__init__.py": "def one():\n    return 1\n",
                      "tests/test_hfk.py": SUITE}.items():
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text(text)
    assert main(["build", str(kernel)]) == 0
    assert (kernel / "build" / "torch-cpu" / "metadata.json").is_file()
    return kernel


@pytest.fixture(scope="module")
def python_without_kernels(tmp_path_factory) -> str:
    """A venv (no pip) whose one .pth names a folder of links to this environment's packages,
    all but Hugging Face's kernels."""
    root = tmp_path_factory.mktemp("nokernels")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    links = root / "packages"
    links.mkdir()
    for folder in map(Path, site.getsitepackages()):
        for entry in folder.iterdir() if folder.is_dir() else ():
            if re.match(r"kernels(\b|-|_data)", entry.name) or entry.suffix == ".pth" or (links / entry.name).exists():
                continue
            (links / entry.name).symlink_to(entry)
    Path(purelib, "packages.pth").write_text(f"{links}\n")
    lacks = subprocess.run([str(python), "-c", "import torch, pytest, importlib.util as u; "
                            "print(u.find_spec('kernels'))"], capture_output=True, text=True, cwd=root)
    assert lacks.returncode == 0 and lacks.stdout.strip() == "None", lacks.stderr
    return str(python)


def kbuild_test(capsys, kernel: Path, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["test", str(kernel), "--variant", "torch-cpu", *args])
    return code, "".join(capsys.readouterr())


@pytest.fixture
def kernel(built, tmp_path, monkeypatch) -> Path:
    import shutil

    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    copy = tmp_path / "hfk"
    shutil.copytree(built, copy, ignore=shutil.ignore_patterns(".kbuild", "__pycache__"))
    return copy


def test_a_python_without_hugging_faces_kernels_is_named_in_one_line(kernel, python_without_kernels, capsys):
    code, out = kbuild_test(capsys, kernel, "--python", python_without_kernels)
    assert code == 1, out
    assert re.search(r"^could not collect hfk/torch-cpu .*No module named 'kernels'", out, re.M), out
    want = (f"the suite imports Hugging Face's `kernels`, which {python_without_kernels} lacks (kbuild names the "
            f"variant to it in LOCAL_KERNELS): {python_without_kernels} -m pip install kernels")
    assert [line.strip() for line in out.splitlines() if "Hugging Face's `kernels`" in line] == [want], out
    assert "Traceback" not in out, out


def test_a_folder_named_kernels_on_the_path_is_named_as_what_the_suite_found(kernel, python_without_kernels,
                                                                               capsys, monkeypatch, tmp_path):
    shadow = tmp_path / "checkout"
    (shadow / "kernels" / "activation").mkdir(parents=True)  # as the checkout's own kernels/ (no __init__.py)
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    code, out = kbuild_test(capsys, kernel, "--python", python_without_kernels)
    assert code == 1, out
    assert "module 'kernels' has no attribute 'get_kernel'" in out, out
    want = (f"the suite's `kernels` is not Hugging Face's loader but a namespace package of {shadow / 'kernels'} "
            f"(in {python_without_kernels}), so it cannot load the variant kbuild names in LOCAL_KERNELS: "
            f"{python_without_kernels} -m pip install kernels (or take that folder off the path)")
    assert [line.strip() for line in out.splitlines() if "not Hugging Face's loader" in line] == [want], out


def test_a_package_named_kernels_ahead_of_hugging_faces_is_named_by_its_file(kernel, capsys, monkeypatch, tmp_path):
    pytest.importorskip("kernels")  # this Python has Hugging Face's; the folder stands in front of it
    shadow = tmp_path / "ahead"
    (shadow / "kernels").mkdir(parents=True)
    (shadow / "kernels" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    code, out = kbuild_test(capsys, kernel)
    assert code == 1, out
    assert f"not Hugging Face's loader but {shadow / 'kernels' / '__init__.py'} (in " in out, out


def test_a_suite_that_fails_otherwise_gets_no_such_line(kernel, capsys):
    pytest.importorskip("kernels")
    (kernel / "tests" / "test_hfk.py").write_text("import kernels\n\n\ndef test_fails():\n"
                                                  "    assert kernels.get_kernel is None\n")
    code, out = kbuild_test(capsys, kernel)
    assert code == 1 and re.search(r"^failed +hfk/torch-cpu .*1 failed", out, re.M), out
    assert "Hugging Face's" not in out, out
