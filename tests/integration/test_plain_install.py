"""`pip install kbuild` without extras, in a fresh venv without torch: `kbuild --help` works, every
command says in one line what to install (and installing that makes it work), get_kernel says
that torch is needed, and that an HTTP hub needs the `hub` extra (installing it makes it reach the hub)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.commands.main import parser

ROOT = Path(__file__).resolve().parents[2]
# the arguments each command needs to get past its parser; every command must be listed
ARGS = {
    "init": ["my-scale"], "check": [], "variants": [], "build": [], "test": [], "publish": [], "matrix": [],
    "info": ["me/my-scale"], "lock": [], "download": [], "hub": ["serve"], "toolchain": ["list"], "clean": [],
    "completion": ["bash"], "bench": [], "check-abi": ["x.so"], "update-build": [], "reproduce": ["me/my-scale@v1"],
    "verify": ["me/my-scale@v1"], "check-layers": [],
}


def wheel_packages() -> list[str]:
    """The top-level packages the wheel holds: pyproject's packages.find patterns over the checkout."""
    import fnmatch

    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted(p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()
                  and any(fnmatch.fnmatch(p.name, pattern) for pattern in patterns))


def commands() -> list[str]:
    (sub,) = [a for a in parser()._actions if a.dest == "command"]
    return list(sub.choices)


def run(*cmd, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[Path, Path]:
    """(the venv, the wheel): the wheel built from a copy of this checkout's sources, installed
    without extras into a venv of its own."""
    tmp = tmp_path_factory.mktemp("plain")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    for package in wheel_packages():
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    done = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp / "dist",
               source, cwd=tmp)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp / "dist").glob("kbuild-*.whl")
    venv = tmp / "venv"
    assert run(sys.executable, "-m", "venv", venv, cwd=tmp).returncode == 0
    done = run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=tmp)
    assert done.returncode == 0, done.stderr
    return venv, wheel


def test_a_plain_install_explains_itself_and_installs_what_it_names(plain, tmp_path):
    venv, wheel = plain
    python, kbuild = venv / "bin" / "python", venv / "bin" / "kbuild"
    installed = run(python, "-m", "pip", "list", "--format=freeze", cwd=tmp_path).stdout.lower()
    assert "rich==" not in installed and "torch==" not in installed and "auditwheel==" not in installed

    done = run(kbuild, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert all(f"    {name}" in done.stdout for name in commands())

    assert set(ARGS) == set(commands()), "a new command: give it its arguments in ARGS"
    install = f'{python} -m pip install "{wheel}[build]"'  # the wheel it came from: kbuild is not on PyPI
    for name, args in ARGS.items():
        done = run(kbuild, name, *args, cwd=tmp_path)
        assert done.returncode == 3, (name, done.stdout, done.stderr)
        (line,) = done.stderr.splitlines()  # one line, no traceback
        assert line.startswith(f"kbuild: error: kbuild {name} needs the builder's libraries, kbuild's `build` "
                               "extra (not installed: "), line
        assert line.endswith(f"): {install}") and "rich" in line and "auditwheel" in line, line

    # get_kernel needs torch and says so (before it asks any hub)
    done = run(python, "-c", f"from kbuild import get_kernel; get_kernel('me/my-scale@v1', hub={str(tmp_path)!r})",
               cwd=tmp_path)
    assert done.returncode == 1
    # kbuild.errors.TorchMissing: a KernelError that is still a ModuleNotFoundError for callers catching that
    assert done.stderr.splitlines()[-1] == (f"kbuild.errors.TorchMissing: kbuild loads kernels into torch, and this Python "
                                            f"({python}) has no torch: install it (pip install torch)")

    # an HTTP hub needs huggingface_hub, the `hub` extra, and says so in one line (a torch stood in for by
    # `system=`: with torch installed, this is the first thing a plain install meets)
    load_http = ("from kbuild import get_kernel; from kbuild.variants import SystemInfo; "
                 "get_kernel('me/my-scale@v1', hub='http://127.0.0.1:9', trust_remote_code=True, "
                 "system=SystemInfo((2, 14), 'cpu', None, 'x86_64', 'linux'))")
    done = run(python, "-c", load_http, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"kbuild.errors.HubClientMissing: http://127.0.0.1:9 is an HTTP hub, which kbuild reads through huggingface_hub, "
        f'and this Python ({python}) has none: install kbuild\'s hub extra (pip install "kbuild[hub]")'), done.stderr
    done = run(python, "-m", "pip", "install", "-q", f"{wheel}[hub]", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    done = run(python, "-c", load_http, cwd=tmp_path)  # now it reaches for the hub, and finds none there
    assert done.returncode == 1 and "HubClientMissing" not in done.stderr, done.stderr
    assert "http://127.0.0.1:9" in done.stderr.splitlines()[-1] and "Connection refused" in done.stderr, done.stderr

    # what the line says to run is what makes the builder work
    done = subprocess.run(install, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    good = ROOT / "tests" / "manifests" / "good" / "edition5-compiled"
    done = run(kbuild, "check", good, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{good / 'build.toml'}: ok (")
