"""The shared compile cache (issue 13): a real redis-server on 127.0.0.1 behind ccache's remote
storage. A second "machine" (another folder, its own empty kbuild cache) gets every compile from
the first one's server; an unreachable server costs only the hits, with one warning."""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

import pytest

from builder.commands.main import main
from builder.config.remote_cache import RemoteCache, parse_remote, resolve_remote
from builder.project.workspace import workspace_url
from cpu_kernel import write_cpu_kernel
from kbuild_common.errors import ManifestError, UsageError

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


def test_bad_settings_are_one_line_errors(tmp_path, capsys, monkeypatch):
    folder = workspace(tmp_path / "ws", None)
    code, out = build(capsys, monkeypatch, folder, tmp_path / "machine", KBUILD_REMOTE_CACHE="ftp://cache:21")
    assert code != 0 and "KBUILD_REMOTE_CACHE: expected a remote cache URL (redis://…" in out
    assert "Traceback" not in out
    (folder / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n[workspace.cache]\nurl = "redis://x"\n')
    code, out = build(capsys, monkeypatch, folder, tmp_path / "machine")
    assert code != 0 and "[workspace.cache] url: unknown key (expected: remote)" in out
    with pytest.raises(ManifestError, match=r"\[workspace.cache\] remote: expected a URL string, got 5"):
        (folder / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n[workspace.cache]\nremote = 5\n')
        resolve_remote(None, partial(workspace_url, folder))
    with pytest.raises(UsageError, match="X: expected a remote cache URL"):
        parse_remote("redis://", "X")


def test_a_password_never_reaches_the_messages():
    cache = RemoteCache("redis://:s3cret@cache.example:6379|connect-timeout=500", "KBUILD_REMOTE_CACHE")
    assert cache.shown() == "redis://:***@cache.example:6379|connect-timeout=500"
    assert RemoteCache("redis://user:pw@h:1", "x").shown() == "redis://user:***@h:1"
    assert RemoteCache("http://h:8080/cache", "x").shown() == "http://h:8080/cache"
    assert "s3cret" not in repr(parse_remote("redis://:s3cret@h:1", "x"))


def test_workspace_without_a_cache_table_has_no_remote(tmp_path):
    folder = workspace(tmp_path / "ws", None)
    assert resolve_remote(None, partial(workspace_url, folder)) is None
    assert resolve_remote(None, partial(workspace_url, folder / "kernels" / "twice")) is None  # a kernel folder, no [workspace]
    shutil.rmtree(folder)
