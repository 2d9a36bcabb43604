"""`kbuild matrix --check` against a real hub: a branch complete, then one missing a variant."""

from __future__ import annotations

import re

from builder.commands.main import main
from runtime_hubs import runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name


def test_matrix_check_finds_a_branch_complete_then_a_missing_variant(tmp_path, capsys, runtime_env):
    """`kbuild matrix --check` over a real local hub: verified and loaded, then one variant gone."""
    from runtime_hubs import Kernel

    kernel = Kernel(tmp_path / "tiny").write().build()
    hub = tmp_path / "hub"
    kernel.publish(hub)
    capsys.readouterr()
    assert main(["matrix", str(kernel.root), "--check", "--hub", str(hub)]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert [line.split()[0] for line in lines] == ["verified", "verified", "loaded"], out
    assert all(line.split()[1] == "org/tiny@v1" for line in lines)
    assert "every variant of the matrix is published and verifies (1 kernel(s))" in out.err

    kernel.publish(hub, "--branch", "next", "--variant", "torch-cuda")  # holds torch-cuda only
    capsys.readouterr()
    assert main(["matrix", str(kernel.root), "--check", "--hub", str(hub), "--branch", "next"]) == 1
    out = capsys.readouterr()
    assert re.search(r"^missing   org/tiny@next \([0-9a-f]{12}\) torch-cpu$", out.out, re.M), out
    assert "1 problem(s): the branch does not hold the whole matrix" in out.err
