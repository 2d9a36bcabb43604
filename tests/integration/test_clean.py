"""`kbuild clean`: everything a build left, or (--stale) only what no longer matches the sources,
on a project `kbuild init` made and real builds of it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from builder.commands.main import main

CPU = "torch-stable-abi210-cpu-x86_64-linux"


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def commit(folder: Path, message: str) -> None:
    for cmd in (["add", "-A"], ["-c", "user.email=c@localhost", "-c", "user.name=c", "commit", "-qm", message]):
        subprocess.run(["git", "-C", str(folder), *cmd], check=True)


def test_clean_stale_keeps_current_builds_and_clean_removes_everything(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    project = tmp_path / "kk"
    assert main(["init", "kk", "--dir", str(project), "--backends", "cpu"]) == 0
    commit(project, "v1")
    assert main(["build", str(project)]) == 0
    variant = project / "build" / CPU
    leftover = project / "build" / f".{CPU}.tmp-99999"  # an interrupted build's staging folder
    leftover.mkdir()

    code, out = run(capsys, "clean", str(project), "--stale")
    assert code == 0 and variant.is_dir() and not leftover.exists(), out
    assert "left by an interrupted build" in out and CPU not in out.replace(leftover.name, "")

    source = project / "kk_cpu" / "scale.cpp"
    source.write_text(source.read_text() + "// changed\n")
    commit(project, "v2")
    code, out = run(capsys, "clean", str(project), "--stale", "--dry-run")
    assert code == 0 and variant.is_dir() and f"would remove {variant}" in out and "was built from sources" in out
    code, out = run(capsys, "clean", str(project), "--stale")
    assert not variant.exists() and (project / ".kbuild").is_dir()

    assert main(["build", str(project)]) == 0 and variant.is_dir()
    code, out = run(capsys, "clean", str(project))
    assert code == 0 and "freed" in out
    assert not (project / "build").exists() and not (project / ".kbuild").exists()
    assert (project / "build.toml").is_file() and source.is_file()  # sources untouched
    code, out = run(capsys, "clean", str(project))
    assert code == 0 and "nothing to clean" in out
