"""Lock files: `kbuild lock` pins a project's kernels, `kbuild download` fills the cache,
`load_kernel` then loads with no hub at all and `get_locked_kernel` downloads what is missing;
both refuse a variant whose metadata differs from the lock."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import pytest

from builder.commands.lock import add_parser
from builder.report import Reporter
from kbuild import IntegrityError, get_locked_kernel, load_kernel
from kbuild.errors import OfflineMiss
from kbuild.lockfile import lock_kernel, read_lock
from kbuild_common.errors import KbuildError
from runtime_hubs import ROCM, Kernel, branch_head, new_process, runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")


def kbuild_cli(argv: list[str], capsys) -> tuple[int, str]:
    """`kbuild lock|download …` as the CLI runs it: one handler call, KbuildError as one line."""
    parser = argparse.ArgumentParser(prog="kbuild")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    reporter = Reporter(plain=True)
    capsys.readouterr()
    try:
        code = args.handler(args, reporter)
    except KbuildError as e:
        reporter.error(str(e), e.hint)
        code = e.exit_code
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.fixture
def hub(tmp_path) -> Path:
    kernel = Kernel(tmp_path / "tiny").write().build()
    hub = tmp_path / "hub"
    kernel.publish(hub)
    return hub


@pytest.fixture
def project(tmp_path, hub) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "app"\n\n[tool.kbuild.kernels]\n"org/tiny" = 1\n')
    return root


def test_lock_download_and_load_offline(project, hub, capsys, tmp_path):
    code, out = kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)
    assert code == 0, out
    lock = json.loads((project / "kernels.lock").read_text())
    entry = lock["kernels"]["org/tiny"]
    assert entry["commit"] == branch_head(hub, "org/tiny", "v1") and entry["revision"] == "v1"
    assert entry["hub"] == str(hub) and sorted(entry["variants"]) == ["torch-cpu", "torch-cuda"]
    meta = hub.parent / "tiny" / "build" / "torch-cuda" / "metadata.json"
    assert entry["variants"]["torch-cuda"] == hashlib.sha256(meta.read_bytes()).hexdigest()

    with pytest.raises(OfflineMiss, match="not in the cache"):
        load_kernel("org/tiny", lockfile=project / "kernels.lock", hub="http://127.0.0.1:9")
    code, out = kbuild_cli(["download", str(project), "--all-variants"], capsys)
    assert code == 0 and "2 variant(s) in the cache, verified" in out, out

    hub.rename(tmp_path / "hub-gone")  # no hub at all from here on
    module = load_kernel("org/tiny", lockfile=project / "kernels.lock")
    assert module.double(2) == 4
    assert load_kernel("org/tiny@v1", lockfile=project / "kernels.lock", backend="cpu").__name__.startswith("_tiny_cpu")


def test_get_locked_kernel_downloads_and_follows_the_lock_not_the_branch(project, hub, capsys, tmp_path):
    assert kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)[0] == 0
    kernel = Kernel(tmp_path / "tiny")
    kernel.write(variant="newer").build().publish(hub)  # v1 moves on after the lock
    module = get_locked_kernel("org/tiny", lockfile=project / "kernels.lock")
    assert module.VARIANT == "?"  # the locked commit, not the branch head


def test_a_metadata_change_against_the_lock_is_refused(project, hub, capsys):
    assert kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)[0] == 0
    lockfile = project / "kernels.lock"
    data = json.loads(lockfile.read_text())
    for variant in data["kernels"]["org/tiny"]["variants"]:  # whichever this machine loads
        data["kernels"]["org/tiny"]["variants"][variant] = "0" * 64
    lockfile.write_text(json.dumps(data))
    with pytest.raises(IntegrityError, match="metadata.json does not match the lock file"):
        get_locked_kernel("org/tiny", lockfile=lockfile)
    new_process()
    with pytest.raises(IntegrityError, match="locked 000000000000"):
        load_kernel("org/tiny", lockfile=lockfile)


def test_lock_errors(project, hub, capsys, tmp_path):
    assert kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)[0] == 0
    with pytest.raises(ValueError, match=r"org/other is not in the lock file .*it locks: org/tiny"):
        load_kernel("org/other", lockfile=project / "kernels.lock")
    with pytest.raises(FileNotFoundError, match=r"no kernels.lock in .* or above it"):
        load_kernel("org/tiny")  # this test file's folder has none
    (project / "pyproject.toml").write_text('[tool.kbuild.kernels]\n"org/tiny" = 7\n')
    code, out = kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)
    assert code == 8 and "no version 7" in out and "available versions: v1" in out
    (project / "pyproject.toml").write_text('[tool.kbuild.kernels]\n"org/tiny" = 1.5\n')
    code, out = kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)
    assert code == 2 and "expected a version number" in out
    code, out = kbuild_cli(["download", str(tmp_path)], capsys)
    assert code == 2 and "no lock file" in out and "kbuild lock" in out
    (project / "kernels.lock").write_text("{}")
    with pytest.raises(ValueError, match="not a kbuild lock file"):
        read_lock(project / "kernels.lock")


def test_pins_in_keys_and_commits(project, hub, capsys):
    sha = branch_head(hub, "org/tiny", "v1")
    (project / "pyproject.toml").write_text(f'[tool.kbuild.kernels]\n"org/tiny@{sha}" = true\n')
    assert kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)[0] == 0
    assert read_lock(project / "kernels.lock")["org/tiny"].revision == sha
    assert lock_kernel("org/tiny", version=1, hub=str(hub)).commit == sha


def test_the_lock_nearest_the_caller(project, hub, capsys, tmp_path):
    assert kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)[0] == 0
    (project / "app").mkdir()
    (project / "app" / "model.py").write_text("import kbuild\nkernel = kbuild.get_locked_kernel('org/tiny')\n")
    namespace = {"__file__": str(project / "app" / "model.py")}
    exec(compile((project / "app" / "model.py").read_text(), str(project / "app" / "model.py"), "exec"), namespace)
    assert namespace["kernel"].double(1) == 2


def test_no_fit_under_a_lock(project, hub, capsys):
    assert kbuild_cli(["lock", str(project), "--hub", str(hub)], capsys)[0] == 0
    with pytest.raises(FileNotFoundError, match=r"(?s)no variant of org/tiny@v1 fits.*Locked to commit.*torch-cpu: rejected"):
        get_locked_kernel("org/tiny", lockfile=project / "kernels.lock", system=ROCM)
