"""bench/reliability.py's signature probes reach what kbuild's loader reads (issue 53 item 5): the
forged signature lives where signatures live (kbuild.repo_layout.ssh_signature), and a probe whose
planted artefact is not what the loader reads fails loudly (ProbeMissed) instead of reporting an
outcome that says nothing about kbuild. Real publishes, real ssh-keygen keys, a real local hub."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

if shutil.which("ssh-keygen") is None:
    pytest.skip("no ssh-keygen", allow_module_level=True)


@pytest.fixture(scope="module")
def reliability():
    spec = importlib.util.spec_from_file_location("reliability", REPO / "bench" / "reliability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def world(reliability, tmp_path, monkeypatch):
    for name in ("KBUILD_CACHE", "XDG_CONFIG_HOME", "HF_HOME", "KBUILD_ALLOWED_SIGNERS"):
        monkeypatch.setenv(name, "")  # restored after the test: World and the probes set them for its folder
    return reliability.World(tmp_path)


def test_a_trusted_signature_over_other_digests_is_planted_where_kbuild_reads_it(reliability, world):
    assert reliability.probe_signature_over_other_digests(world) == "refused, not cached"


def test_a_signature_planted_inside_the_variant_folder_is_a_probe_that_missed(reliability, world):
    """The probe's old set-up: the forged signature inside build/<variant>/, beside a good one under
    signatures/<variant>/, which is the one kbuild reads (so the forgery was never seen)."""
    from runtime_hubs import upload_as_another_builder

    keys = reliability._keys(world)
    world.kernel.publish(world.hub, "--sign", "--sign-key", str(keys["alice"]))
    variant = reliability._variant(world)
    folder = world.root / "upload" / variant.name
    shutil.copytree(variant, folder)
    meta = json.loads((folder / "metadata.json").read_text())
    meta["digest"]["files"]["__init__.py"] = "A" * 43 + "="
    other = world.root / "other.json"
    other.write_text(json.dumps(meta))
    subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "kbuild", "-f", str(keys["alice"]), str(other)], check=True,
                   capture_output=True)
    shutil.copy(f"{other}.sig", folder / "metadata.json.sig")
    upload_as_another_builder(world.hub, "org/tiny", "v1", folder)
    with pytest.raises(reliability.ProbeMissed, match="the loader reads another signature for torch-"):
        reliability._signature_read(world, Path(f"{other}.sig").read_bytes())


def test_the_other_signature_probes_check_what_the_loader_reads(reliability, world):
    assert reliability.probe_signature_unlisted_key(world) == "refused, not cached"  # mallory's, as read
    with pytest.raises(reliability.ProbeMissed, match="the loader reads another signature"):
        reliability._signature_read(world, None)  # signed: the unsigned probes' set-up would have missed
