"""`kbuild reproduce` (issue 31, part 2): a kernel (a CPU and a CUDA variant, on this GPU-less
machine) is built and published by the real CLI to a local git hub and to `kbuild hub serve`;
reproducing a published variant rebuilds it from the recorded commit and toolchain in a fresh folder
and finds every file the same, over either hub. A variant changed on the hub by one byte (its
digests made to match, so the loader takes it) is caught and the file named; sources without the
recorded commit and variants kbuild did not build are one-line errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_compile_cache import BUILD_TOML, FILES

from builder.commands.main import main
from hubserver import TOKEN, ServerThread
from kbuild import hub_loader
from kbuild.digest import digest_tree
from runtime_hubs import git, runtime_env, torch_probes, upload_as_another_builder

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

REPO_ID = "org/addone"


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory) -> Path:
    """One ccache for the module's builds: each test builds the same sources in its own folders."""
    return tmp_path_factory.mktemp("ccache")


@pytest.fixture
def published(tmp_path, runtime_env, monkeypatch, compile_cache) -> dict:
    """The kernel's repository, built and published to a local hub; the variant names."""
    if shutil.which("nvcc") is None:
        pytest.fail("no nvcc: this test builds a CUDA variant")
    monkeypatch.setenv("CCACHE_DIR", str(compile_cache))
    repo = tmp_path / "src"
    for rel, text in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / "build.toml").write_text(BUILD_TOML)
    (repo / ".gitignore").write_text("build/\n.kbuild/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "addone"]):
        git(repo, *args)
    assert main(["build", str(repo), "-j", "2"]) == 0
    hub = tmp_path / "hub"
    assert main(["publish", str(repo), "--hub", str(hub), "--repo-id", REPO_ID]) == 0
    names = sorted(p.name for p in (repo / "build").iterdir() if not p.name.startswith("."))
    cuda = next(n for n in names if "-cu1" in n)
    cpu = next(n for n in names if "-cpu-" in n)
    return {"repo": repo, "hub": hub, "cuda": cuda, "cpu": cpu}


def reproduce(capsys, *args: str) -> tuple[int, str]:
    """One `kbuild reproduce`, as in a new process: the loader forgets the refs it read."""
    hub_loader.forget()
    capsys.readouterr()
    code = main(["reproduce", f"{REPO_ID}@v1", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_published_cuda_variant_is_rebuilt_bit_for_bit(published, capsys):
    code, out = reproduce(capsys, "--hub", str(published["hub"]), "--source", str(published["repo"]),
                          "--variant", published["cuda"], "--json")
    assert code == 0, out
    record = json.loads(out[out.index("{"):])
    assert record["identical"] and record["variant"] == published["cuda"] and record["kernel-folder"] == "."
    states = {f["path"]: f["state"] for f in record["files"]}
    assert set(states.values()) == {"same"} and "metadata.json" in states, states
    assert any(p.endswith(".abi3.so") for p in states), states
    assert record["toolchain"]["nvcc"]["version"] and record["toolchain"]["torch"]["version"]


def test_over_kbuild_hub_serve_the_loaders_choice_from_the_working_checkout(published, capsys, monkeypatch,
                                                                             tmp_path):
    server = ServerThread(tmp_path / "served")
    try:
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        assert main(["publish", str(published["repo"]), "--hub", server.url, "--repo-id", REPO_ID]) == 0
        monkeypatch.delenv("HF_TOKEN")
        monkeypatch.chdir(published["repo"])  # no --source: the working folder's repository
        code, out = reproduce(capsys, "--hub", server.url)
    finally:
        server.stop()
    assert code == 0, out
    # no GPU here: the loader picks the CPU build
    assert f"{REPO_ID}@v1 {published['cpu']}: rebuilt from commit" in out, out
    assert out.rstrip().endswith("files are the same"), out


def test_one_byte_changed_on_the_hub_is_named(published, capsys, tmp_path):
    tampered = tmp_path / "tampered" / published["cpu"]
    shutil.copytree(published["repo"] / "build" / published["cpu"], tampered)
    library = next(tampered.glob("*.so"))
    data = bytearray(library.read_bytes())
    data[len(data) // 2] ^= 0x01
    library.write_bytes(bytes(data))
    metadata = json.loads((tampered / "metadata.json").read_text())
    metadata["digest"]["files"] = digest_tree(tampered)  # consistent: the loader verifies and takes it
    (tampered / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    upload_as_another_builder(published["hub"], REPO_ID, "v1", tampered)

    code, out = reproduce(capsys, "--hub", str(published["hub"]), "--source", str(published["repo"]),
                          "--variant", published["cpu"])
    assert code == 1, out
    assert f"differs  {library.name}" in out and "differs  metadata.json" in out, out
    assert "same     __init__.py" in out and "NOT identical: 2 same, 2 differs" in out, out


def test_what_cannot_be_reproduced_is_one_line(published, capsys, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "README").write_text("another project\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "other"]):
        git(other, *args)
    code, out = reproduce(capsys, "--hub", str(published["hub"]), "--source", str(other), "--variant", published["cpu"])
    assert code == 2 and f"--source {other} does not hold commit" in out, out

    foreign = tmp_path / "foreign" / published["cpu"]
    shutil.copytree(published["repo"] / "build" / published["cpu"], foreign)
    metadata = json.loads((foreign / "metadata.json").read_text())
    metadata["provenance"]["kernel-builder"] = {"name": "kernel-builder", "version": "0.9"}
    (foreign / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    upload_as_another_builder(published["hub"], REPO_ID, "v1", foreign)
    code, out = reproduce(capsys, "--hub", str(published["hub"]), "--source", str(published["repo"]),
                          "--variant", published["cpu"])
    assert code == 1 and "was not built by kbuild (its provenance names kernel-builder)" in out, out
    assert len([line for line in out.splitlines() if "error" in line]) == 1, out

    newer = tmp_path / "newer" / published["cuda"]
    shutil.copytree(published["repo"] / "build" / published["cuda"], newer)
    metadata = json.loads((newer / "metadata.json").read_text())
    metadata["provenance"]["toolchain"]["nvcc"]["version"] = "13.9.99"
    (newer / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    upload_as_another_builder(published["hub"], REPO_ID, "v1", newer)
    code, out = reproduce(capsys, "--hub", str(published["hub"]), "--source", str(published["repo"]),
                          "--variant", published["cuda"])
    assert code == 3 and "the variant was built with nvcc 13.9.99 (system); here: nvcc 13." in out, out
    assert "the toolchain store knows no CUDA 13.9: install nvcc 13.9.99, set CUDA_HOME" in out, out

    code, out = reproduce(capsys, "--hub", str(published["hub"]), "--variant", "torch-nope")
    assert code == 1 and "has no variant 'torch-nope'" in out, out
