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
