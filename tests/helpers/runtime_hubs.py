"""Helpers for the runtime's hub tests: a tiny Python-only kernel in a git repo, published with the
real `kbuild publish` into a real local git hub, and that hub served over HTTP by the real
`kbuild hub serve` app on 127.0.0.1, whose log counts the requests each load makes.

Imported by the runtime tests by module name (pytest.ini_options pythonpath puts tests/helpers on sys.path).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest

from builder.commands.main import main
from kbuild import hub_loader
from kbuild.digest import digest_tree
from kbuild.variants import SystemInfo

CUDA130 = SystemInfo((2, 14), "cuda", (13, 0), "x86_64", "linux")
CPU = SystemInfo((2, 14), "cpu", None, "x86_64", "linux")
ROCM = SystemInfo((2, 14), "rocm", (6, 3), "x86_64", "linux")

INIT = '''"""A tiny kernel for loader tests."""
from ._ops import ops

VARIANT = {variant!r}


def double(x):
    return x * 2


__all__ = ["double", "VARIANT"]
'''
MANIFEST = """[general]
name = "tiny"
version = {version}
edition = 5
license = "Apache-2.0"
backends = {backends}
[general.hub]
repo-id = "{repo_id}"

[torch-noarch]
"""
ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
       "PATH": "/usr/bin:/bin"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, check=True, capture_output=True, text=True).stdout


@dataclass
class Kernel:
    """A kernel project that can be built and published with the real CLI."""

    root: Path
    repo_id: str = "org/tiny"

    def write(self, version: int = 1, backends=("cpu", "cuda"), variant: str = "?") -> Kernel:
        package = self.root / "torch-ext" / "tiny"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text(INIT.format(variant=variant))
        (self.root / "build.toml").write_text(
            MANIFEST.format(version=version, backends=json.dumps(list(backends)), repo_id=self.repo_id))
        if not (self.root / ".git").is_dir():
            (self.root / ".gitignore").write_text("build/\n.kbuild/\n")
            git(self.root, "init", "-q", "-b", "main")
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "--allow-empty", "-m", "change")
        return self

    def build(self) -> Kernel:
        assert main(["build", str(self.root)]) == 0
        return self

    def variant(self, name: str) -> Path:
        return self.root / "build" / name

    def fake(self, name: str, like: str = "torch-cuda") -> Path:
        """A variant folder named `name`, made from a built one: its own VARIANT, id and digest
        (so compiled names can be tested without compiling)."""
        target = self.variant(name)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.variant(like), target)
        init = (target / "__init__.py").read_text()
        (target / "__init__.py").write_text(init.replace(f"VARIANT = {'?'!r}", f"VARIANT = {name!r}"))
        meta = json.loads((target / "metadata.json").read_text())
        meta["id"] = "_tiny_" + name.replace("-", "_")
        meta["digest"]["files"] = digest_tree(target)
        (target / "metadata.json").write_text(json.dumps(meta, indent=2))
        return target

    def publish(self, hub, *args: str) -> str:
        """Publish to `hub` (a folder or URL); the new commit of the branch."""
        code = main(["publish", str(self.root), "--hub", str(hub), "--json", *args])
        assert code == 0
        return branch_head(hub, self.repo_id, _branch(args) or "v1") if isinstance(hub, Path) else ""


def upload_as_another_builder(hub: Path, repo_id: str, branch: str, variant: Path) -> str:
    """Commit a variant folder to the hub as another tool would (kernel-builder's builds may have
    no digest, which `kbuild publish` refuses to upload); the branch's new commit."""
    from builder.hub.address import parse_hub
    from builder.hub.backend import Upload
    from builder.hub.open import open_hub

    backend = open_hub(parse_hub(str(hub)), None)
    backend.ensure_repo(repo_id)
    uploads = [Upload(f"build/{variant.name}/{p.relative_to(variant).as_posix()}", p)
               for p in sorted(variant.rglob("*")) if p.is_file()]
    return backend.commit(repo_id, branch, uploads=uploads, deletes=[], message="another builder",
                          parent=backend.head(repo_id, branch))


def _branch(args) -> str | None:
    return args[args.index("--branch") + 1] if "--branch" in args else None


def branch_head(hub: Path, repo_id: str, branch: str) -> str:
    return git(bare(hub, repo_id), "rev-parse", branch).strip()


def bare(hub: Path, repo_id: str = "org/tiny") -> Path:
    org, name = repo_id.split("/")
    return hub / "kernels" / org / f"{name}.git"


# -- the HTTP hub --------------------------------------------------------------------------------

@dataclass
class Served:
    """`kbuild hub serve` running in this process (hubserver.ServerThread): its URL and
    every request line it logged."""

    url: str
    root: Path
    token: str
    logged: Callable[[int], list[str]]  # ServerThread.logged: the lines from an index on, once settled

    def requests(self, since: int = 0) -> list[str]:
        """`METHOD /path` of each request since `since` (query strings dropped)."""
        return [line.split(" ")[0] + " " + unquote(line.split(" ")[1].split("?")[0]) for line in self.logged(since)]

    def mark(self) -> int:
        return len(self.logged(0))


def start_server(root: Path):
    """The real app on a free port, in a thread; (Served, stop)."""
    from hubserver import TOKEN, ServerThread

    root.mkdir(parents=True, exist_ok=True)
    thread = ServerThread(root)
    return Served(thread.url, root, TOKEN, thread.logged), thread.stop


# -- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def torch_probes(tmp_path_factory) -> Path:
    """The builder's torch probe cache, shared by the session: probing torch takes seconds."""
    return tmp_path_factory.mktemp("probes")


@pytest.fixture
def runtime_env(tmp_path, monkeypatch, torch_probes):
    """A private cache, no hub or offline settings from the outside, and a fresh process memory."""
    for name in ("KBUILD_HUB", "HF_ENDPOINT", "KBUILD_OFFLINE", "HF_HUB_OFFLINE", "KBUILD_TRUSTED_ORGS",
                 "LOCAL_KERNELS", "HF_TOKEN", "KBUILD_REQUIRE_SIGNATURE", "KBUILD_ALLOWED_SIGNERS", "KBUILD_SIGNATURES",
                 "KBUILD_SIGNING_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "probes").symlink_to(torch_probes)
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    # huggingface_hub's user-agent telemetry would ask huggingface.co for its agent registry.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    hub_loader.forget()
    before = set(sys.modules)
    yield tmp_path / "cache" / "kernels"
    hub_loader.forget()
    for name in set(sys.modules) - before:
        origin = getattr(sys.modules[name], "__file__", None) or ""
        if origin.startswith(str(tmp_path)):
            del sys.modules[name]


def new_process() -> None:
    """What a fresh process knows: nothing in memory, only the disk cache."""
    hub_loader.forget()
    for name in [n for n in sys.modules if n.startswith("_tiny_")]:
        del sys.modules[name]
