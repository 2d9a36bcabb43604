"""`kbuild publish` refuses a build that takes public names (its package's `__all__`) away from a version
branch's users, unless told `--force`: the branch's names are read from what the hub holds (each variant's
`build/<variant>/__init__.py`), the new build's from its folders."""

from __future__ import annotations

import json

from builder.commands.main import main
from runtime_hubs import INIT, Kernel, git, runtime_env, torch_probes  # noqa: F401 (fixtures)


def commit(kernel: Kernel) -> Kernel:
    """The kernel's edited source committed (a build names its source by commit)."""
    git(kernel.root, "commit", "-q", "-am", "edit")
    return kernel


def test_a_build_that_drops_a_public_name_is_refused_unless_forced(tmp_path, runtime_env, capsys):  # noqa: F811
    hub = tmp_path / "hub"
    kernel = Kernel(tmp_path / "tiny").write().build()
    kernel.publish(hub)

    package = kernel.root / "torch-ext" / "tiny" / "__init__.py"
    package.write_text(INIT.format(variant="?").replace('__all__ = ["double", "VARIANT"]', '__all__ = ["VARIANT"]'))
    commit(kernel).build()
    capsys.readouterr()
    assert main(["publish", str(kernel.root), "--hub", str(hub)]) != 0
    said = capsys.readouterr().err
    assert "this would break the branch's users" in said
    assert "torch-cpu lacks double, which the branch already offers" in " ".join(said.split())

    assert main(["publish", str(kernel.root), "--hub", str(hub), "--force", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["commit"]


def test_a_build_that_keeps_every_public_name_publishes(tmp_path, runtime_env, capsys):  # noqa: F811
    hub = tmp_path / "hub"
    kernel = Kernel(tmp_path / "tiny").write().build()
    kernel.publish(hub)
    package = kernel.root / "torch-ext" / "tiny" / "__init__.py"
    package.write_text(package.read_text().replace('__all__ = ["double", "VARIANT"]',
                                                   '__all__ = ["double", "triple", "VARIANT"]')
                       + "\n\ndef triple(x):\n    return x * 3\n")
    commit(kernel).build()
    assert main(["publish", str(kernel.root), "--hub", str(hub)]) == 0
