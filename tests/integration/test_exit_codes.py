"""Every exit code of the README's table (builder/errors.py ExitCode), each brought about for real
through the CLI: a real compiler failing, a Python without torch, an nvcc that fails, a hub server
that refuses, ... Each failure is one error line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from builder.commands.main import main
from cpu_kernel import write_cpu_kernel
from hubserver import ServerThread
from kbuild_common.errors import ExitCode

GOOD = Path(__file__).resolve().parents[1] / "manifests" / "good" / "edition5-compiled"
BAD = Path(__file__).resolve().parents[1] / "manifests" / "bad" / "unknown-top-level-table"
SEEN: set[int] = set()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A folder with a kernel that builds (`ok`, built by the first test that needs it) and one that
    does not compile."""
    root = tmp_path_factory.mktemp("exit-codes")
    write_cpu_kernel(root / "ok", "okk", "int okk_value() { return 1; }\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "v1"]):
        subprocess.run(["git", "-C", str(root / "ok"), *args], check=True)  # publish wants committed sources
    write_cpu_kernel(root / "broken", "broken", "int broken_value() { return undeclared; }\n")
    return root


@pytest.fixture(autouse=True)
def isolated(work, monkeypatch):
    monkeypatch.setenv("KBUILD_CACHE", str(work / "cache"))
    for name in ("KBUILD_HUB", "HF_ENDPOINT", "HF_TOKEN", "TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)


def outcome(capsys, *argv: str, output: list | None = None) -> tuple[int, str]:
    """(exit code, the error lines); all of stdout and stderr go to `output`. A traceback fails."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    SEEN.add(int(code))
    if output is not None:
        output.append(out + err)
    return code, "\n".join(line for line in err.splitlines() if line.startswith("kbuild: error:"))


def test_0_success(work, capsys):
    assert outcome(capsys, "check", GOOD) == (ExitCode.OK, "")
    code, err = outcome(capsys, "build", work / "ok")
    assert (code, err) == (ExitCode.OK, "")
    assert (work / "ok" / "build").is_dir()


def test_1_a_variant_failed_to_build(work, capsys):
    output = []
    code, err = outcome(capsys, "build", work / "broken", output=output)
    assert code == ExitCode.FAILED
    assert "error: ‘undeclared’ was not declared in this scope" in output[0]  # the compiler's own error


def test_2_a_malformed_build_toml_or_a_bad_argument(work, capsys):
    code, err = outcome(capsys, "check", BAD)
    assert code == ExitCode.USAGE and "[build]: unknown table" in err
    code, err = outcome(capsys, "build", work / "ok", "-j", "0")
    assert code == ExitCode.USAGE and "-j/--jobs: expected a positive number, got 0" in err


def test_2_a_token_file_others_can_read_is_a_bad_argument(tmp_path):
    """`kbuild hub serve` refuses it before it listens: exit 2 (a bad argument), not 6 (the hub refused a request)."""
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("kb_secret\n")
    tokens.chmod(0o644)
    serve = [sys.executable, "-m", "builder.commands.main", "hub", "serve", "--root", str(tmp_path / "hub"),
             "--port", "0", "--token-file", str(tokens)]
    done = subprocess.run(serve, capture_output=True, text=True, timeout=120)  # a served hub would time out
    assert done.returncode == ExitCode.USAGE, (done.returncode, done.stderr)
    assert done.stderr.splitlines()[0] == (f"kbuild: error: --token-file: {tokens}: the token file is readable by "
                                           "others (mode 0644)"), done.stderr
    assert f"chmod 600 {tokens}" in done.stderr and "Traceback" not in done.stderr


def test_3_a_toolchain_missing(work, capsys):
    venv = work / "no-torch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    code, err = outcome(capsys, "build", work / "ok", "--python", venv / "bin" / "python")
    assert code == ExitCode.TOOLCHAIN and f"cannot import torch with {venv / 'bin' / 'python'}" in err


def test_4_a_build_step_could_not_run(work, capsys, tmp_path):
    """The variant cannot be written: `build` is a file."""
    write_cpu_kernel(tmp_path / "blocked", "blocked", "int blocked_value() { return 1; }\n")
    (tmp_path / "blocked" / "build").write_text("not a folder")
    code, err = outcome(capsys, "build", tmp_path / "blocked")
    assert code == ExitCode.BUILD and f"cannot write {tmp_path / 'blocked' / 'build'}" in err


def test_5_a_subprocess_failed(work, capsys, monkeypatch):
    """An nvcc that fails when asked its version (a CUDA build of torch looks for nvcc)."""
    import torch

    if not torch.version.cuda:
        pytest.skip("a CPU build of torch never runs nvcc")
    nvcc = work / "broken-cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text("#!/bin/sh\necho 'nvcc: broken' >&2\nexit 1\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(nvcc.parent.parent))
    code, err = outcome(capsys, "build", work / "ok")
    assert code == ExitCode.COMMAND and f"nvcc --version failed (exit 1): {nvcc} --version" in err


def test_6_the_hub_refused_or_failed(work, capsys, tmp_path):
    assert outcome(capsys, "build", work / "ok")[0] == ExitCode.OK  # up to date when test_0 ran
    server = ServerThread(tmp_path / "hub")
    try:  # no token: a real `kbuild hub serve` refuses the write
        code, err = outcome(capsys, "publish", work / "ok", "--repo-id", "me/okk", "--hub", server.url)
    finally:
        server.stop()
    assert code == ExitCode.HUB and "(kbuild hub serve) takes writes only with one of its tokens" in err, err
    # nothing listens there any more: one line too, not httpx's traceback
    code, err = outcome(capsys, "publish", work / "ok", "--repo-id", "me/okk", "--hub", server.url)
    assert code == ExitCode.HUB and f"cannot look up me/okk: no answer from the hub at {server.url}" in err, err


def test_7_publish_refused(work, capsys, tmp_path):
    code, err = outcome(capsys, "publish", work / "broken", "--repo-id", "me/broken", "--hub", tmp_path / "hub")
    assert code == ExitCode.REFUSED and "nothing built to publish" in err


def test_8_lock_could_not_resolve(work, capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.kbuild.kernels]\n"me/missing" = 1\n')
    code, err = outcome(capsys, "lock", tmp_path, "--hub", tmp_path / "no-hub")
    assert code == ExitCode.LOCK and f"local hub {tmp_path / 'no-hub'} does not exist" in err


def test_every_class_was_brought_about(request):
    """Runs last in this file: each exit code of ExitCode came from one of the tests above."""
    selected = {int(item.name.split("_")[1]) for item in request.session.items
                if item.module is request.module and item.name.split("_")[1].isdigit()}
    if selected != {int(c) for c in ExitCode}:  # -m "not slow" or -k left some out: nothing to judge
        pytest.skip(f"the tests of exit codes {sorted({int(c) for c in ExitCode} - selected)} did not run")
    assert SEEN == {int(c) for c in ExitCode}, sorted({int(c) for c in ExitCode} - SEEN)
