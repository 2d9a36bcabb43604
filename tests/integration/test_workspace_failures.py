"""A workspace survives one bad member: a member whose build.toml is bad, one that cannot be
planned (its only section is for Blackwell, the build for Hopper) and one that fails to compile
are each reported failed in one line, while the good member still builds and is staged in the
same graph and loads; the exit code is 1. `kbuild publish` of that workspace then publishes the
good member and refuses the others, naming each. Real g++, nvcc, ninja and a local git hub.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.commands.main import main
from cpu_kernel import REGISTERED_BINDING, hub_repo, write_cpu_kernel, write_cuda_kernel
from kbuild.variants import detect_system

torch = pytest.importorskip("torch")
SYSTEM = detect_system()
CPU = detect_system("cpu").compiled_variant().name

# No source includes torch (a bare extension module and plain C++/CUDA): the graph is quick.
ANSWER = "from ._ops import ops\n\n\ndef answer():\n    return 42\n"


def member(ws: Path, name: str, source: str) -> Path:
    return write_cpu_kernel(ws / "kernels" / name, name, source, extra=hub_repo(f"me/{name}"),
                            binding=REGISTERED_BINDING, package=ANSWER)


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    if SYSTEM.backend != "cuda":
        pytest.skip("the unplannable member needs a CUDA build of torch and nvcc")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n')
    member(ws, "good", "int good_one() { return 1; }\n")
    member(ws, "broken", "int broken() { return 1 }\n")
    write_cuda_kernel(ws / "kernels" / "blackwell", "blackwell", "__global__ void k(float* x) { x[0] = 1.0f; }\n",
                      ("10.0a",), extra=hub_repo("me/blackwell"), package=ANSWER)
    bad = member(ws, "bad-toml", "int f() { return 0; }\n")
    (bad / "build.toml").write_text((bad / "build.toml").read_text().replace('license = "Apache-2.0"\n',
                                                                             'license = "Apache-2.0"\nlicence = 1\n'))
    return ws


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def one_line(output: str, pattern: str) -> str:
    """The summary line that matches `pattern` (exactly one)."""
    found = [line for line in output.splitlines() if re.search(pattern, line)]
    assert len(found) == 1, (pattern, output)
    return found[0]


def test_one_bad_member_of_each_kind_leaves_the_good_one_built(workspace, capsys):
    from kbuild import get_local_kernel

    code, output = run(capsys, "build", str(workspace), "--cuda-archs", "9.0", "--no-cache", "-j", "2")
    assert code == 1, output
    assert "Traceback" not in output
    bad = one_line(output, r"^failed\s+bad-toml/build\.toml ")
    assert re.search(r"bad-toml/build\.toml:\d+: \[general\] licence", bad), bad
    cuda = SYSTEM.compiled_variant().name
    plan = one_line(output, rf"^failed\s+blackwell/{cuda} ")
    assert re.search(r"blackwell/build\.toml:\d+: \[kernel\.blackwell_cuda\] cuda-capabilities: none of 10\.0a is in "
                     r"--cuda-archs 9\.0, and no other section has CUDA code: nothing to compile", plan), plan
    compile_line = one_line(output, rf"^failed\s+broken/{CPU} ")
    assert re.search(r"— broken_cpu/broken\.cpp: .*error: expected .;. before .}. token", compile_line), compile_line
    built = one_line(output, rf"^built\s+good/{CPU} ")
    assert str(workspace / "kernels" / "good" / "build" / CPU) in built
    # one graph held the good member and the one that failed to compile
    graph = (workspace / ".kbuild" / "build.ninja").read_text()
    assert "good_cpu/good.cpp" in graph and "broken_cpu/broken.cpp" in graph
    for name in ("broken", "blackwell", "bad-toml"):
        assert not (workspace / "kernels" / name / "build").exists()
    good = get_local_kernel(workspace / "kernels" / "good", backend="cpu")
    assert good.answer() == 42

    # publish: the good member goes out; each of the others is refused in one line, naming it
    hub = workspace.parent / "hub"
    code, output = run(capsys, "publish", str(workspace), "--hub", str(hub), "--allow-dirty")
    assert code != 0, output
    assert "published " + CPU + " to me/good@v1" in output, output
    assert re.search(r"kbuild: error: bad-toml: not published: \S*bad-toml/build\.toml:\d+: \[general\] licence",
                     output), output
    for name in ("broken", "blackwell"):
        assert re.search(rf"kbuild: error: {name}: not published: \S*{name}/build: nothing built to publish",
                         output), output
