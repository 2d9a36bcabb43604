"""`kbuild init` refuses bad names, taken folders and mixed backends, in-process."""

from __future__ import annotations

from builder.commands.main import main


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_init_refuses_bad_names_taken_folders_and_mixed_backends(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    for args, message in [
        (["Bad_Name"], "'Bad_Name' is not a kernel name"),
        (["taken"], "exists and is not an empty folder"),
        (["x", "--backends", "triton,cpu"], "cannot share a project"),
        (["x", "--backends", "gpu"], "expected a comma-separated subset of cpu, cuda, triton"),
    ]:
        code, out = run(capsys, "init", *args)
        assert code == 2 and message in out and "Traceback" not in out, out
    assert not (tmp_path / "x").exists()
