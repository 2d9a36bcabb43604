"""Builds through a real redis compile cache: a second machine hits, an unreachable one falls back."""

from __future__ import annotations

import re
from pathlib import Path

from builder.commands.main import main
from cpu_kernel import write_cpu_kernel
from redis_server import free_port, keys, redis_server

SOURCE = "int twice(int x) { return 2 * x; }\nint thrice(int x) { return 3 * x; }\n"
CPU = "torch214-cxx11-cpu-x86_64-linux"


def workspace(root: Path, remote: str | None) -> Path:
    cache = f'\n[workspace.cache]\nremote = "{remote}"\n' if remote else ""
    root.mkdir(parents=True)
    (root / "build.toml").write_text(f'[workspace]\nmembers = ["kernels/*"]\n{cache}')
    write_cpu_kernel(root / "kernels" / "twice", "twice", SOURCE)
    return root


def build(capsys, monkeypatch, folder: Path, machine: Path, **env: str) -> tuple[int, str]:
    monkeypatch.setenv("KBUILD_CACHE", str(machine))  # each machine: its own local compile cache
    for name in ("KBUILD_REMOTE_CACHE", "CCACHE_DIR", "CCACHE_REMOTE_STORAGE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = main(["build", str(folder), "--variant", CPU])
    out = capsys.readouterr()
    return code, out.out + out.err


def stats(output: str) -> tuple[int, int, int]:
    m = re.search(r"compile cache: (\d+) hit\(s\)(?: \((\d+) remote\))?, (\d+) miss\(es\)", output)
    assert m, output
    return int(m[1]), int(m[2] or 0), int(m[3])


def test_a_second_machine_gets_every_compile_from_the_shared_cache(tmp_path, capsys, monkeypatch):
    with redis_server(tmp_path / "redis") as url:
        first = workspace(tmp_path / "first", url)  # named in the workspace build.toml
        code, out = build(capsys, monkeypatch, first, tmp_path / "machine1")
        assert code == 0, out
        assert f"compile cache shared through {url} ({first}/build.toml: [workspace.cache] remote)" in out
        hits, remote, misses = stats(out)
        assert (hits, remote) == (0, 0) and misses >= 2  # the binding and the kernel's source
        assert keys(url) >= misses  # every object went to the server

        # "the second machine": a fresh copy elsewhere, an empty local cache, the URL from the environment
        second = workspace(tmp_path / "second", None)
        code, out = build(capsys, monkeypatch, second, tmp_path / "machine2", KBUILD_REMOTE_CACHE=url)
        assert code == 0, out
        assert stats(out) == (misses, misses, 0), out  # every unit a remote hit
        assert "(KBUILD_REMOTE_CACHE)" in out
    lib = f"kernels/twice/build/{CPU}"
    assert sorted(p.name for p in (second / lib).iterdir()) == sorted(p.name for p in (first / lib).iterdir())
    so = [p.relative_to(first) for p in (first / lib).rglob("*.so")]
    assert so and all((first / p).read_bytes() == (second / p).read_bytes() for p in so)


def test_an_unreachable_server_builds_locally_with_one_warning(tmp_path, capsys, monkeypatch):
    folder = workspace(tmp_path / "ws", None)
    url = f"redis://127.0.0.1:{free_port()}"  # nothing listens there
    code, out = build(capsys, monkeypatch, folder, tmp_path / "machine", KBUILD_REMOTE_CACHE=url)
    assert code == 0, out
    hits, _, misses = stats(out)
    warnings = [line for line in out.splitlines() if "did not answer" in line]
    assert len(warnings) == 1 and url in warnings[0] and f"for {misses} compile(s)" in warnings[0], out
    assert (folder / "kernels" / "twice" / "build" / CPU / "metadata.json").is_file()


def test_off_turns_the_workspace_setting_off(tmp_path, capsys, monkeypatch):
    with redis_server(tmp_path / "redis") as url:
        folder = workspace(tmp_path / "ws", url)
        code, out = build(capsys, monkeypatch, folder, tmp_path / "machine", KBUILD_REMOTE_CACHE="off")
        assert code == 0, out
        assert "shared through" not in out and keys(url) == 0
