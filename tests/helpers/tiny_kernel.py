"""The tiny Python-only kernel the publish tests build and publish (two noarch variants, each
build a fraction of a second), committed in its own git repository, with the local git hub it
goes to and the CLI calls that build and publish it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.commands.main import main

INIT = '"""A tiny kernel for publish tests."""\nfrom ._ops import ops\n\n{body}\n__all__ = {names!r}\n'
MANIFEST = """[general]
name = "tiny"
version = {version}
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]
{hub}
[torch-noarch]
"""


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def write_kernel(root: Path, names=("double",), version=1, hub='[general.hub]\nrepo-id = "org/tiny"\n'):
    package = root / "torch-ext" / "tiny"
    package.mkdir(parents=True, exist_ok=True)
    body = "\n".join(f"def {n}(x):\n    return x * 2\n" for n in names)
    (package / "__init__.py").write_text(INIT.format(body=body, names=list(names)))
    (root / "build.toml").write_text(MANIFEST.format(version=version, hub=hub))
    (root / "benchmarks").mkdir(exist_ok=True)
    (root / "benchmarks" / "benchmark.py").write_text("print('bench')\n")


@pytest.fixture
def kernel(tmp_path) -> Path:
    root = tmp_path / "tiny"
    root.mkdir()
    write_kernel(root)
    (root / ".gitignore").write_text("build/\n.kbuild/\n")
    git(root, "init", "-q", "-b", "main")
    commit(root)
    return root


def commit(root: Path) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "change")


@pytest.fixture
def hub(tmp_path) -> Path:
    return tmp_path / "hub"


def build(root: Path) -> None:
    assert main(["build", str(root)]) == 0


def publish(root: Path, hub: Path, *args: str, capsys=None) -> tuple[int, str]:
    if capsys:
        capsys.readouterr()
    code = main(["publish", str(root), "--hub", str(hub), *args])
    out = capsys.readouterr() if capsys else None
    return code, (out.out + out.err) if out else ""


def bare(hub: Path) -> Path:
    return hub / "kernels" / "org" / "tiny.git"


def tree(hub: Path, rev: str) -> list[str]:
    return git(bare(hub), "ls-tree", "-r", "--name-only", rev).split()
