"""What kbuild shows on a terminal: every string reaches rich as literal text (a `[/]` in a
status, a path or a toolchain never breaks the output), names and paths are never cut with "…",
progress starts with the build and names the step running, and skipped tests say why.

The integration test runs the real CLI under a pseudo-terminal at 80 and 200 columns, as a user
sees it: a copy of tests/fixtures/relu-stable (its CPU variant) built cold and again with nothing
to do, tested, published to a local hub, listed by `kbuild variants` and `kbuild info`.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from builder import report, resources
from builder.compile.ninja_run import run_ninja
from builder.report import Reporter
from builder.verify.kernel_tests import skip_reasons

REPO = Path(__file__).resolve().parents[2]
KBUILD = Path(sys.executable).parent / "kbuild"
FIXTURE = REPO / "tests" / "fixtures" / "relu-stable"
STABLE_CPU = "torch-stable-abi210-cpu-x86_64-linux"


SUITE = {
    "test_gpu.py": "import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2, 3])\ndef test_on_gpu(n):\n"
                   "    pytest.skip('no CUDA device [/]')\n",
    "test_marked.py": "import pytest\n\n\n@pytest.mark.skipif(True, reason='needs triton')\ndef test_triton():\n"
                      "    pass\n\n\ndef test_runs():\n    pass\n",
    "test_module.py": "import pytest\n\npytest.skip('no neuron here', allow_module_level=True)\n",
}


def test_skip_reasons_come_from_kbuilds_pytest_plugin_whatever_the_suites_r_setting(tmp_path):
    """The plugin `kbuild test` loads groups skips as pytest's -rs does, and leaves -r alone."""
    (tmp_path / "tests").mkdir()
    for name, text in SUITE.items():
        (tmp_path / "tests" / name).write_text(text)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "kbuild_skip_reasons.py").write_bytes(resources.read_bytes("templates/kbuild_skip_reasons.py"))
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -rA\n")
    env = {**os.environ, "PYTHONPATH": str(plugins), "KBUILD_SKIP_REASONS": str(tmp_path / "skips.jsonl")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "kbuild_skip_reasons",
                           "tests"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASSED tests/test_marked.py::test_runs" in done.stdout  # the suite's own -rA still applies
    assert skip_reasons(tmp_path / "skips.jsonl") == (
        "skipped 3: tests/test_gpu.py:6: no CUDA device [/]",
        "skipped 1: tests/test_marked.py:4: needs triton",
        "skipped 1: tests/test_module.py:3: no neuron here",
    )


# -- the step running now, from a real ninja ---------------------------------------------------


def test_a_long_step_is_named_while_it_runs(tmp_path, monkeypatch, capsys):
    """ninja names a step only when it finishes: kbuild finds the running one among ninja's
    processes (plain output: a line once it has run for STILL_RUNNING_S)."""
    monkeypatch.setattr(report, "STILL_RUNNING_S", 1)
    out = tmp_path / "slow.o"
    # a compile's shape: the output follows -o
    (tmp_path / "build.ninja").write_text(
        "rule slow\n  command = sh -c 'sleep 2.5; : > \"$$2\"' slow -o $out\n  description = $desc\n"
        f"build {out}: slow\n  desc = CXX {tmp_path}/slow.cpp (v1)\n")
    outcome = run_ninja(tmp_path / "build.ninja", [str(out)], None, Reporter(plain=True),
                        owners={f"CXX {tmp_path}/slow.cpp (v1)": ("v1",)},
                        outputs={str(out): f"CXX {tmp_path}/slow.cpp (v1)"})
    assert outcome.returncode == 0 and out.is_file()
    printed = capsys.readouterr().err
    assert re.search(rf"^still running after [12]s: CXX {re.escape(str(tmp_path))}/slow\.cpp \(v1\)$", printed, re.M), \
        printed
    assert f"[1/1] CXX {tmp_path}/slow.cpp (v1)" in printed


# -- the real CLI under a pseudo-terminal (slow) -----------------------------------------------


ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][A-Z0-9])")
SKIPPING_TEST = '''\
import pytest


def test_needs_a_gpu():
    pytest.skip("no CUDA device [/] on this machine")
'''


def in_terminal(args: list[str], cwd: Path, columns: int, env: dict[str, str], timeout: float = 900) -> tuple[int, str]:
    """Run `args` with stdin, stdout and stderr on a pseudo-terminal `columns` wide; its exit code
    and everything it wrote, without terminal control sequences (each redraw of a live view on a
    line of its own)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    child = subprocess.Popen(args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                child.kill()
                raise AssertionError(f"{args} did not finish in {timeout} s: {b''.join(chunks)[-2000:]!r}")
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    code = child.wait(timeout=60)
    text = b"".join(chunks).decode(errors="replace").replace("\x1b[2K", "\n")  # a live view redraws from a cleared line
    return code, ANSI.sub("", text).replace("\r", "")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    # deep enough that every path is longer than 80 columns
    root = tmp_path_factory.mktemp("terminal") / ("a-folder-with-a-long-name-" * 3) / "relu-stable"
    shutil.copytree(FIXTURE, root, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    (root / "tests" / "test_skips.py").write_text(SKIPPING_TEST)
    (root / ".gitignore").write_text("build/\n.kbuild/\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "v1"]):
        subprocess.run(["git", *cmd], cwd=root, env={**os.environ, **env}, check=True, capture_output=True)
    return root


@pytest.mark.parametrize("columns", [80, 200])
def test_the_cli_on_a_terminal(project, tmp_path, columns):
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "TERM")}
    env.update(COLUMNS=str(columns), LINES="50", TERM="xterm-256color", KBUILD_HUB=str(tmp_path / "hub"))
    variant_dir = project / "build" / STABLE_CPU
    kernel = ["--variant", STABLE_CPU]

    def kbuild(*args: str) -> str:
        code, out = in_terminal([str(KBUILD), *args], project, columns, env)
        assert code == 0 and "Traceback" not in out and "MarkupError" not in out, out
        assert "…" not in out, out  # no name or path cut short, in the live view or after it
        return out

    # cold: the 80-column run compiles (no cache), so the live view has a step to show running
    assert in_terminal([str(KBUILD), "clean", "."], project, columns, env)[0] == 0
    cold = kbuild("build", ".", *kernel, *(["--no-cache"] if columns == 80 else []))
    assert re.search(r"^. planning\s", cold, re.M) and re.search(r"^. compiling ", cold, re.M), cold
    if columns == 80:
        assert re.search(r"running \d+s: CXX (torch-ext/torch_binding\.cpp|relu_cpu/relu_cpu\.cpp)", cold), cold
    for out in (cold, kbuild("build", ".", *kernel)):  # the rebuild with nothing to do crashed here
        assert "┏" in out  # rich drew its table: this is the terminal rendering, not the plain one
        assert f"relu-stable/{STABLE_CPU}" in out and f"\n  {variant_dir}\n" in out
        assert f"log {project}/.kbuild/{STABLE_CPU}/build.log" in out
    tested = kbuild("test", ".", *kernel)
    assert re.search(rf"│ relu-stable\s+│ {STABLE_CPU}\s+│ passed\s+│", tested), tested
    assert f"log {project}/.kbuild/{STABLE_CPU}/test.log" in tested
    assert "skipped 1: tests/test_skips.py:5: no CUDA device [/] on this machine" in tested
    published = kbuild("publish", ".", *kernel, "--repo-id", "me/relu-stable")
    assert f"published {STABLE_CPU} to me/relu-stable@v1" in published
    assert STABLE_CPU in kbuild("variants", ".")
    info = kbuild("info", "me/relu-stable")
    assert f"me/relu-stable on local hub {tmp_path / 'hub'}" in info and STABLE_CPU in info
