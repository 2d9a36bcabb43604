"""`kbuild publish` with `kbuild check-layers`' records (issue 50): a variant's record of its own
build is published as `layer-checks/<variant>.json`, outside `build/<variant>/`; a record of an
earlier build is left out in one line; a republish without one drops the old one. Against a real
local git hub and a real `kbuild hub serve`, and Hugging Face's `kernels` 0.19 still loads a variant
published with its record.

The records are written here as `kbuild check-layers` writes them (builder/verify/layer_check.py's
`keep`): kbuild publish reads nothing else of the check, and transformers need not run."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

import hf_envs
from builder.commands.main import main
from runtime_hubs import Kernel, runtime_env, start_server, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")

ROWS = [{"layer": "rotary_pos_emb", "kernel_layer": "apply_rotary_transformers", "dtype": "float32",
         "mode": "training", "part": "forward", "quantity": "output 0", "rel": 0.0, "tolerance": 1e-4, "ok": True},
        {"layer": "rotary_pos_emb", "kernel_layer": "apply_rotary_transformers", "dtype": "float32",
         "mode": "training", "part": "backward", "quantity": "grad of q", "rel": 0.77, "tolerance": 1e-4, "ok": False}]


def write_record(kernel: Kernel, variant: str, of: bytes | None = None) -> bytes:
    """The variant's `.kbuild/<variant>/layer-check.json`, of its build as it is (or of `of`, a
    metadata.json of another build)."""
    meta = of if of is not None else (kernel.variant(variant) / "metadata.json").read_bytes()
    doc = {"metadata_sha256": hashlib.sha256(meta).hexdigest(), "verdict": {"forward": True, "backward": False},
           "kernel": "tiny", "variant": variant, "where": "on cpu", "maps": [], "torch": "2.13.0",
           "transformers": "5.25.0", "device": "cpu", "gpu": None, "model": "llama", "tolerance": {},
           "layers": [], "rows": ROWS, "notes": [], "diagnosis": {}}
    record = kernel.root / ".kbuild" / variant / "layer-check.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(doc, indent=1))
    return record.read_bytes()


def git_hub(hub: Path, *args: str) -> str:
    bare = hub / "kernels" / "org" / "tiny.git"
    return subprocess.run(["git", "--git-dir", str(bare), *args], check=True, capture_output=True, text=True).stdout


def outside_build(hub: Path, commit: str) -> list[str]:
    return [p for p in git_hub(hub, "ls-tree", "-r", "--name-only", commit).split() if not p.startswith("build/")]


def published(kernel: Kernel, hub, capsys, *args: str) -> tuple[dict, str]:
    """Publish with --json: (its summary, what it said on stderr)."""
    capsys.readouterr()
    kernel.publish(hub, *args)
    seen = capsys.readouterr()
    return json.loads(seen.out), seen.err


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    return Kernel(tmp_path / "tiny").write().build()


def test_a_current_record_is_published_beside_its_variant_and_a_stale_one_is_not(tmp_path, kernel, capsys):
    hub = tmp_path / "hub"
    record = write_record(kernel, "torch-cpu")
    write_record(kernel, "torch-cuda", of=b'{"an": "earlier build"}')
    summary, said = published(kernel, hub, capsys)
    commit = summary["commit"]
    assert summary["layer_checks"] == ["torch-cpu"]
    assert outside_build(hub, commit) == ["layer-checks/torch-cpu.json"]
    assert git_hub(hub, "show", f"{commit}:layer-checks/torch-cpu.json").encode() == record  # as written
    stale = [line for line in said.splitlines() if "layer check not published" in line]
    assert stale == [f"torch-cuda: layer check not published: {kernel.root / '.kbuild/torch-cuda/layer-check.json'}"
                     f" is of an earlier build (its metadata.json differs); run kbuild check-layers {kernel.root} "
                     "again to publish one"]

    # the plain summary says it too
    write_record(kernel, "torch-cpu")
    (kernel.root / ".kbuild" / "torch-cpu" / "layer-check.json").write_text(
        json.dumps({**json.loads(record), "notes": ["checked again"]}))
    assert main(["publish", str(kernel.root), "--hub", str(hub)]) == 0
    assert "with the layer checks of torch-cpu (layer-checks/)" in capsys.readouterr().out

    # republished without a record: the old one goes, so no older build's result stays beside the new one
    (kernel.root / ".kbuild" / "torch-cpu" / "layer-check.json").unlink()
    summary, said = published(kernel, hub, capsys)
    assert summary["layer_checks"] == [] and summary["deleted"] == ["layer-checks/torch-cpu.json"]
    assert outside_build(hub, summary["commit"]) == [] and "torch-cpu: layer check" not in said


def test_a_slice_owns_only_its_own_variants_records(tmp_path, kernel, capsys):
    hub = tmp_path / "hub"
    write_record(kernel, "torch-cpu")
    write_record(kernel, "torch-cuda")
    summary, _ = published(kernel, hub, capsys)
    assert summary["layer_checks"] == ["torch-cpu", "torch-cuda"]
    (kernel.root / ".kbuild" / "torch-cuda" / "layer-check.json").unlink()
    summary, _ = published(kernel, hub, capsys, "--variant", "torch-cpu")
    assert summary["layer_checks"] == ["torch-cpu"] and summary["deleted"] == []
    assert outside_build(hub, summary["commit"]) == ["layer-checks/torch-cpu.json", "layer-checks/torch-cuda.json"]


def test_an_unreadable_record_is_left_out_in_one_line(tmp_path, kernel, capsys):
    record = kernel.root / ".kbuild" / "torch-cpu" / "layer-check.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"verdict": ')
    summary, said = published(kernel, tmp_path / "hub", capsys)
    assert summary["layer_checks"] == [] and outside_build(tmp_path / "hub", summary["commit"]) == []
    lines = [line for line in said.splitlines() if "layer check" in line]
    assert len(lines) == 1 and lines[0].startswith(f"torch-cpu: layer check not published: {record} is unreadable "
                                                   "(not JSON")


def test_a_dry_run_lists_the_record(tmp_path, kernel, capsys):
    write_record(kernel, "torch-cpu")
    assert main(["publish", str(kernel.root), "--hub", str(tmp_path / "hub"), "--dry-run"]) == 0
    assert "  add      layer-checks/torch-cpu.json" in capsys.readouterr().out


# -- over HTTP, and Hugging Face's loader ------------------------------------------------------------

@pytest.fixture(scope="module")
def served_with_records(tmp_path_factory):
    """org/tiny v1 published with torch-cpu's record to a real `kbuild hub serve`."""
    kernel = Kernel(tmp_path_factory.mktemp("tiny")).write().build()
    write_record(kernel, "torch-cpu")
    served, stop = start_server(tmp_path_factory.mktemp("served"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("HF_TOKEN", served.token)
            kernel.publish(served.url)
        yield kernel, served
    finally:
        stop()


def test_over_http_the_record_lands_and_a_republish_without_it_drops_it(served_with_records, monkeypatch, capsys):
    from huggingface_hub import HfApi, hf_hub_download

    kernel, served = served_with_records
    api = HfApi(endpoint=served.url)
    files = api.list_repo_files("org/tiny", repo_type="kernel", revision="v1")
    assert "layer-checks/torch-cpu.json" in files and "layer-checks/torch-cuda.json" not in files
    got = hf_hub_download("org/tiny", "layer-checks/torch-cpu.json", repo_type="kernel", revision="v1",
                          endpoint=served.url, token=served.token)
    assert Path(got).read_bytes() == (kernel.root / ".kbuild/torch-cpu/layer-check.json").read_bytes()

    monkeypatch.setenv("HF_TOKEN", served.token)
    write_record(kernel, "torch-cuda", of=b"{}")  # stale over HTTP too
    summary, said = published(kernel, served.url, capsys, "--variant", "torch-cuda")
    assert summary["layer_checks"] == [] and "torch-cuda: layer check not published" in said


@pytest.mark.parametrize("env", ["kernels-0.19"])
def test_hugging_faces_loader_loads_a_variant_published_with_its_record(env, tmp_path, served_with_records):
    """kernels 0.18+ refuse a file in build/<variant>/ the digest lacks; layer-checks/ is no folder
    they list or download."""
    python = hf_envs.HOME / env / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no Hugging Face environment at {python.parent.parent} (ci/setup.sh makes it)")
    _, served = served_with_records
    script = ("import json, kernels, pathlib\n"
              "k = kernels.get_kernel('org/tiny', version=1, backend='cpu', trust_remote_code=True)\n"
              "folder = pathlib.Path(k.__file__).parent\n"
              "print(json.dumps({'double': k.double(21), 'version': kernels.__version__,\n"
              "                  'files': sorted(p.name for p in folder.iterdir())}))\n")
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                          env=hf_envs.client_env(served.url, tmp_path / "hf"), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["double"] == 42 and seen["version"] == "0.19.1" and "layer-check.json" not in seen["files"]
    assert not list((tmp_path / "hf").rglob("layer-checks"))  # not even fetched


# -- kbuild info -------------------------------------------------------------------------------------

def info(hub, capsys, *args: str) -> str:
    capsys.readouterr()
    assert main(["info", "org/tiny", "--hub", str(hub), "--backend", "cpu", *args]) == 0
    return capsys.readouterr().out


def test_kbuild_info_shows_each_variants_published_verdict(tmp_path, kernel, capsys):
    hub = tmp_path / "hub"
    write_record(kernel, "torch-cpu")
    kernel.publish(hub)
    rows = {r["variant"]: r["layers"] for r in json.loads(info(hub, capsys, "--json"))["variants"]}
    assert rows["torch-cpu"] == {
        "checked": "layers checked against transformers 5.25.0 (torch 2.13.0, cpu): forward ✓ backward ✗",
        "differs": "rotary_pos_emb (apply_rotary_transformers): grad of q differs, rel 0.77"}
    assert rows.get("torch-cuda", "not listed") in (None, "not listed")
    out = info(hub, capsys)
    assert "forward ✓ backward ✗" in out and "grad of q differs, rel 0.77" in out


def test_kbuild_info_over_http(served_with_records, capsys):
    _, served = served_with_records
    out = info(served.url, capsys)
    assert "layers checked against transformers 5.25.0 (torch 2.13.0, cpu): forward ✓ backward ✗" in out


def test_kbuild_info_says_a_malformed_record_is_unreadable(tmp_path, kernel, capsys):
    from builder.hub.address import parse_hub
    from builder.hub.backend import Upload
    from builder.hub.open import open_hub

    hub = tmp_path / "hub"
    kernel.publish(hub)
    broken = tmp_path / "broken.json"
    broken.write_text('{"metadata_sha256": "nope"}')
    backend = open_hub(parse_hub(str(hub)), None)
    backend.commit("org/tiny", "v1", uploads=[Upload("layer-checks/torch-cpu.json", broken)], deletes=[],
                   message="a record no kbuild wrote", parent=backend.head("org/tiny", "v1"))
    out = info(hub, capsys)
    assert "layer check unreadable (metadata_sha256 is not a sha256 in hex)" in out
