"""`kbuild info`: versions, variants, sizes and the variant this machine loads, read from a real
local hub and from `kbuild hub serve` over HTTP, with the runtime's own readers."""

from __future__ import annotations

import json
import os

import pytest

from builder.commands.main import main
from kbuild import resolve_kernel
from runtime_hubs import Kernel, runtime_env, start_server, torch_probes  # noqa: F401 (fixtures)


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    return Kernel(tmp_path / "tiny").write().build()


def test_info_lists_versions_variants_and_the_one_that_loads(kernel, tmp_path, runtime_env, capsys):
    hub = tmp_path / "hub"
    kernel.publish(hub)
    kernel.publish(hub, "--branch", "v2", "--force")
    code, out = run(capsys, "info", "org/tiny", "--hub", str(hub))
    assert code == 0, out
    assert out.splitlines()[0] == f"org/tiny on local hub {hub}"
    assert "versions: v1 (" in out and ", v2 (" in out
    assert "v2 = commit " in out  # the newest version by default
    chosen = resolve_kernel("org/tiny@v2", hub=str(hub)).chosen
    assert any(chosen in line and "<- get_kernel loads this" in line for line in out.splitlines()), out

    code, out = run(capsys, "info", "org/tiny@v1", "--hub", str(hub), "--json")
    record = json.loads(out)
    assert record["revision"] == "v1" and record["versions"].keys() == {"v1", "v2"}
    assert {r["variant"] for r in record["variants"]} == {"torch-cpu", "torch-cuda"}
    assert all(r["size"] > 0 and r["files"] >= 2 for r in record["variants"])
    assert sum(r["loads"] for r in record["variants"]) == 1

    code, out = run(capsys, "info", "org/tiny", "--hub", str(hub), "--backend", "cpu")
    assert "torch-cuda" in out and "rejected (built for cuda, this system uses cpu)" in out


def test_info_over_http_and_its_errors(kernel, tmp_path, runtime_env, capsys, monkeypatch):
    served, stop = start_server(tmp_path / "served")
    try:
        name = f"org/tiny-{os.urandom(3).hex()}"
        kernel.repo_id = name
        monkeypatch.setenv("HF_TOKEN", served.token)
        kernel.write().build().publish(served.url, "--repo-id", name)
        monkeypatch.setenv("HF_ENDPOINT", served.url)  # the hub rule: no --hub needed
        monkeypatch.delenv("KBUILD_HUB", raising=False)
        code, out = run(capsys, "info", name)
        assert code == 0 and out.splitlines()[0] == f"{name} on hub {served.url}", out
        assert "<- get_kernel loads this" in out
        code, out = run(capsys, "info", "org/absent")
        assert code == 1 and "no kernel repo org/absent on hub http" in out and "Traceback" not in out
        code, out = run(capsys, "info", f"{name}@v7")
        assert code == 1 and "no version 7" in out
        code, out = run(capsys, "info", "absent")
        assert code == 2 and "not a kernel repo id" in out
    finally:
        stop()


def test_variants_of_a_published_kernel_print_the_trace(kernel, tmp_path, runtime_env, capsys, monkeypatch):
    """`kbuild variants ORG/NAME[@REV]`: kernels' `variants` trace (accepted and rejected, with the
    reason for each) for a published kernel; a folder of that name is still a folder."""
    hub = tmp_path / "hub"
    kernel.publish(hub)
    kernel.publish(hub, "--branch", "v2", "--force")
    code, out = run(capsys, "variants", "org/tiny", "--hub", str(hub), "--backend", "cpu")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith(f"org/tiny on local hub {hub}; this machine: torch ")
    assert lines[1].startswith("v2 = commit ")  # the newest version by default
    assert lines[2:] == ["  torch-cpu: fits, get_kernel loads this",
                         "  torch-cuda: rejected (built for cuda, this system uses cpu)"]

    code, out = run(capsys, "variants", "org/tiny@v1", "--hub", str(hub), "--backend", "cpu", "--json")
    record = json.loads(out)
    (v1,) = record["revisions"]
    assert v1["revision"] == "v1" and v1["commit"] == resolve_kernel("org/tiny@v1", hub=str(hub)).commit
    assert v1["variants"] == [
        {"variant": "torch-cpu", "accepted": True, "reason": None, "note": None, "loads": True},
        {"variant": "torch-cuda", "accepted": False, "reason": "built for cuda, this system uses cpu", "note": None,
         "loads": False}]

    code, out = run(capsys, "variants", "org/tiny", "--hub", str(hub), "--all-versions", "--json")
    assert [r["revision"] for r in json.loads(out)["revisions"]] == ["v2", "v1"]

    code, out = run(capsys, "variants", "org/missing", "--hub", str(hub))
    assert code != 0 and len(out.strip().splitlines()) == 1 and "org/missing" in out, out
    code, out = run(capsys, "variants", "org/tiny@v1", "--hub", str(hub), "--all-versions")
    assert code != 0 and "--all-versions lists every vN; org/tiny@v1 names one revision" in out, out

    # a kernel folder keeps its meaning, however it is named
    folder = tmp_path / "org" / "tiny"
    folder.parent.mkdir()
    kernel.root.rename(folder)
    monkeypatch.chdir(tmp_path)
    code, out = run(capsys, "variants", "org/tiny")
    assert code == 0 and out.startswith("tiny: torch-"), out
    code, out = run(capsys, "variants", "org/tiny", "--backend", "cpu")
    assert code != 0 and "--backend is for a published kernel (ORG/NAME[@REV]); org/tiny is a folder" in out, out
