"""`kbuild init`: the generated projects build with real compilers, pass their own tests with
`kbuild test`, publish to a real local hub and load back through get_kernel, as generated."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.commands.main import main
from kbuild import get_kernel, install_kernel

torch = pytest.importorskip("torch")


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def commit(folder: Path) -> None:
    for cmd in (["add", "-A"], ["-c", "user.email=init@localhost", "-c", "user.name=init", "commit", "-qm", "v1"]):
        subprocess.run(["git", "-C", str(folder), *cmd], check=True)


@pytest.mark.parametrize("backends, variants", [
    ("cpu,cuda", ["torch-stable-abi210-cpu-x86_64-linux"]),
    ("triton", ["torch-cuda"]),
])
def test_a_new_project_builds_tests_publishes_and_loads(backends, variants, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    code, out = run(capsys, "init", "my-scale", "--backends", backends, "--org", "me")
    assert code == 0, out
    project = tmp_path / "my-scale"
    assert (project / ".git").is_dir() and "build/" in (project / ".gitignore").read_text()
    assert (project / "torch-ext" / "my_scale" / "__init__.py").is_file()
    assert main(["check", str(project)]) == 0
    commit(project)  # as its README says: builds name their sources by commit

    archs = ["--cuda-archs", "8.0"] if "cuda" in backends and shutil.which("nvcc") else []
    code, out = run(capsys, "build", str(project), *archs)
    assert code == 0, out
    built = sorted(p.name for p in (project / "build").iterdir())
    assert set(variants) <= set(built), built

    code, out = run(capsys, "test", str(project))
    assert code == 0, out
    for variant in variants:
        assert any(line.startswith("passed") and variant in line for line in out.splitlines()), out

    hub = tmp_path / "hub"
    code, out = run(capsys, "publish", str(project), "--hub", str(hub), *(["--allow-partial-archs"] if archs else []))
    assert code == 0, out
    if backends == "triton" and not torch.cuda.is_available():
        # importing it here would need TRITON_INTERPRET before triton's import: fetch and verify here,
        # then load it as the README says, in processes of their own
        assert install_kernel("me/my-scale@v1", hub=str(hub)).name == "torch-cuda"
        assert "TRITON_INTERPRET=1 python -c" in (project / "README.md").read_text()
        load = ("import torch; from kbuild import get_kernel; "
                f"print(get_kernel('me/my-scale@v1', hub={str(hub)!r}).scale(torch.ones(3), 2.0).tolist())")
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        bare = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, env=env, timeout=300)
        assert bare.returncode == 1 and bare.stderr.splitlines()[-1] == (
            "RuntimeError: scale: a Triton kernel needs a GPU (a CUDA tensor; this one is on cpu), or "
            "TRITON_INTERPRET=1 set before the kernel is loaded, to run it on the CPU"), bare.stderr
        assert "active drivers" not in bare.stderr
        interpreted = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=300,
                                     env={**env, "TRITON_INTERPRET": "1"})
        assert interpreted.returncode == 0 and interpreted.stdout.strip() == "[2.0, 2.0, 2.0]", interpreted.stderr
        return
    kernel = get_kernel("me/my-scale@v1", hub=str(hub))
    x = torch.randn(5, 3)
    torch.testing.assert_close(kernel.scale(x, 3.0), x * 3.0)


def test_init_inside_another_repository_is_refused_unless_asked(tmp_path, capsys, monkeypatch):
    """Run from a checkout (the README's quick start from kbuild's own), the project would land in
    that repository and be committed into it: refused, naming the repository and the ways out."""
    outer = tmp_path / "checkout"
    outer.mkdir()
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    monkeypatch.chdir(outer)
    code, out = run(capsys, "init", "my-scale")
    assert code == 2
    assert f"kbuild: error: kbuild init: {outer / 'my-scale'} would be inside the git repository {outer}" in out
    assert "--dir" in out and "--in-repo" in out and "Traceback" not in out
    assert not (outer / "my-scale").exists()

    code, out = run(capsys, "init", "my-scale", "--dir", str(tmp_path / "elsewhere" / "my-scale"))
    assert code == 0, out
    assert (tmp_path / "elsewhere" / "my-scale" / ".git").is_dir()  # a repository of its own
    assert f"next: cd {tmp_path / 'elsewhere' / 'my-scale'}," in out

    code, out = run(capsys, "init", "member", "--dir", "kernels/member", "--in-repo")
    assert code == 0, out
    assert (outer / "kernels" / "member" / "build.toml").is_file()
    assert not (outer / "kernels" / "member" / ".git").exists()  # part of the outer repository
    assert "next: cd kernels/member," in out
