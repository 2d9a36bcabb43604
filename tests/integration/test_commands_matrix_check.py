"""`kbuild matrix --check` against a real hub: a branch complete, then one missing a variant."""

from __future__ import annotations

import re

import pytest

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


def test_the_loaded_line_names_the_variant_loaded_when_the_first_choice_is_rejected(tmp_path, capsys, runtime_env):
    """The variant this machine prefers by name is rejected when its metadata.json is read (a
    python-depends no kbuild knows), so the next one is loaded: the "loaded" line names that one,
    not the rejected first choice."""
    import json

    from kbuild import choice
    from kbuild.variants import detect_system
    from runtime_hubs import Kernel

    kernel = Kernel(tmp_path / "tiny").write().build()
    order = [c.name for c in choice.resolve(["torch-cpu", "torch-cuda"], detect_system()) if c.accepted]
    if len(order) < 2:
        pytest.skip(f"this torch takes {order} of torch-cpu and torch-cuda: no second choice to fall back to")
    first, second = order[:2]
    meta_path = kernel.variant(first) / "metadata.json"  # outside the variant's digest
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "python-depends": ["no-such-dependency"]}, indent=2))
    hub = tmp_path / "hub"
    kernel.publish(hub)
    capsys.readouterr()
    assert main(["matrix", str(kernel.root), "--check", "--hub", str(hub)]) == 0
    out = capsys.readouterr()
    [loaded] = [line.split() for line in out.out.splitlines() if line.startswith("loaded")]
    assert loaded[1] == "org/tiny@v1" and loaded[3] == second, out
    assert loaded[4:] == ["as", json.loads((kernel.variant(second) / "metadata.json").read_text())["id"]]  # its module
