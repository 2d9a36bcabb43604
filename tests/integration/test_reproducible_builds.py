"""Issue 31, part 1: a variant is a function of its sources and its recorded toolchain, nothing else.

One kernel with a CPU and a CUDA variant (nvcc, two archs; its sources use __FILE__ and an
anonymous namespace, which name the source's path) and one Python-only kernel, from one git
commit, are built twice by the real CLI in two processes that differ in every machine-specific
thing a build could leak: the folder, HOME and USER, KBUILD_CACHE, -j1 against -j2, a cold compile
cache against a warm one, and the wall-clock hour (libfaketime, five hours on). nvcc cannot run
under libfaketime at all (its cicc recurses into clock_gettime while libfaketime starts, and hangs),
so the build on the moved clock is the warm one, whose CUDA objects come from the compile cache, and
a third build compiles the CPU variants cold on the moved clock. Every file of every variant folder
must be byte-identical, no file may name a folder, home or user, and the toolchain each compiled
variant records (provenance.toolchain) must be there and the same.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_compile_cache import BUILD_TOML, FILES

from runtime_hubs import git

REPO = Path(__file__).resolve().parents[2]
NOARCH = """[general]
name = "pyonly"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch-noarch]
"""


def source_repo(root: Path) -> Path:
    """Both kernels in one committed repository (a workspace), so both builds read one commit."""
    addone = root / "addone"
    for rel, text in FILES.items():
        (addone / rel).parent.mkdir(parents=True, exist_ok=True)
        (addone / rel).write_text(text)
    (addone / "build.toml").write_text(BUILD_TOML.replace('cuda-capabilities = ["8.0"]',
                                                          'cuda-capabilities = ["8.0", "9.0"]'))
    pyonly = root / "pyonly"
    (pyonly / "torch-ext" / "pyonly").mkdir(parents=True)
    (pyonly / "torch-ext" / "pyonly" / "__init__.py").write_text("def double(x):\n    return x * 2\n")
    (pyonly / "build.toml").write_text(NOARCH)
    (root / "build.toml").write_text('[workspace]\nmembers = ["addone", "pyonly"]\n')
    (root / ".gitignore").write_text("build/\n.kbuild/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "kernels"]):
        git(root, *args)
    return root


def clone(source: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", str(source), str(dest)], check=True, capture_output=True)
    return dest


def libfaketime() -> Path | None:
    found = sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1")) + sorted(
        Path("/usr/lib/faketime").glob("libfaketime.so.1"))
    return found[0] if found else None


def build(folder: Path, *, home: Path, user: str, cache: Path, jobs: int, later_hours: int = 0,
          variants: tuple[str, ...] = ()) -> str:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBUILD_", "CCACHE_", "FAKETIME"))}
    env.update(HOME=str(home), USER=user, LOGNAME=user, KBUILD_CACHE=str(cache), PYTHONPATH=str(REPO))
    if later_hours:
        # preloaded directly, not through the `faketime` wrapper, whose shared semaphore also deadlocks
        env.update(LD_PRELOAD=str(libfaketime()), FAKETIME=f"+{later_hours}h")
    command = [sys.executable, "-m", "builder.commands.main", "build", str(folder), "-j", str(jobs)]
    command += [arg for v in variants for arg in ("--variant", v)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=home)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def variant_files(workspace: Path) -> dict[str, bytes]:
    return {str(p.relative_to(workspace)): p.read_bytes()
            for p in sorted(workspace.glob("*/build/*/**/*")) if p.is_file()}


def test_two_builds_that_differ_in_everything_but_the_sources_give_the_same_bytes(tmp_path):
    if libfaketime() is None:
        pytest.fail("libfaketime is not installed (ci/setup.sh installs it: apt-get install faketime)")
    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        pytest.fail("no nvcc: this test builds a CUDA variant")
    source = source_repo(tmp_path / "source")

    first = clone(source, tmp_path / "alice-work" / "kernels")
    out_a = build(first, home=tmp_path / "home-alice", user="alice", cache=tmp_path / "cache-a", jobs=1)

    # the second build's compile cache is warm: a third folder filled it first
    warm = clone(source, tmp_path / "warmup" / "kernels")
    build(warm, home=tmp_path / "home-bob", user="bob", cache=tmp_path / "cache-b", jobs=2)
    second = clone(source, tmp_path / "elsewhere" / "deeper" / "bob-kernels")
    out_b = build(second, home=tmp_path / "home-bob", user="bob", cache=tmp_path / "cache-b", jobs=2, later_hours=5)
    assert "compile cache: 0 hit(s)" in out_a and "miss(es)" in out_a, out_a
    assert "compile cache: 0 hit(s)" not in out_b and ", 0 miss(es)" in out_b, out_b

    a, b = variant_files(first), variant_files(second)
    variants = sorted({Path(name).parts[2] for name in a})
    assert len(variants) == 4 and variants[:2] == ["torch-cpu", "torch-cuda"], variants  # + a CPU and a CUDA build
    assert sorted(a) == sorted(b)
    differ = [name for name in a if a[name] != b[name]]
    assert not differ, differ

    # the CPU variants compiled cold on the moved clock, by a third user in a third folder
    cpu = [v for v in variants if "-cu1" not in v]
    third = clone(source, tmp_path / "carol" / "kernels")
    out_c = build(third, home=tmp_path / "home-carol", user="carol", cache=tmp_path / "cache-c", jobs=2,
                  later_hours=5, variants=tuple(cpu))
    assert "compile cache: 0 hit(s)" in out_c, out_c
    c = variant_files(third)
    assert sorted(c) == sorted(n for n in a if Path(n).parts[2] in cpu)
    differ = [name for name in c if c[name] != a[name]]
    assert not differ, differ

    for name, data in a.items():
        for leak in (str(tmp_path).encode(), b"alice", b"bob", b"carol", b"home-"):
            assert leak not in data, (name, leak)

    records = {}
    for metadata in sorted(first.glob("*/build/*/metadata.json")):
        provenance = json.loads(metadata.read_text())["provenance"]
        records[metadata.parent.name] = provenance.get("toolchain")
    compiled = {name: r for name, r in records.items() if name not in ("torch-cpu", "torch-cuda")}
    assert records["torch-cpu"] is None and records["torch-cuda"] is None  # nothing compiled, nothing to record
    for name, record in compiled.items():
        assert record["torch"]["version"] and len(record["torch"]["files-sha256"]) == 64, record
        assert record["cxx"] and record["ninja"] and record["edition"] == 5, record
        assert record["source-date-epoch"] == "0", record
        assert ("nvcc" in record) == ("cu1" in name), (name, record)
    cuda = next(r for name, r in compiled.items() if "cu1" in name)
    assert cuda["nvcc"]["version"].count(".") == 2 and cuda["nvcc"]["from"] in ("system", "wheel"), cuda
    cuda_meta = json.loads(next(first.glob("addone/build/*cu1*/metadata.json")).read_text())
    assert cuda_meta["backend"]["archs"] == ["8.0", "9.0"]
