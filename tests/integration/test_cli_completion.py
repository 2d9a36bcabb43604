"""bash completion of kbuild's commands and options, run in a real bash."""

from __future__ import annotations

import pytest

from builder.commands.main import main


def test_bash_completion_completes_commands_and_options(capsys):
    """The script `kbuild completion bash` prints, sourced in a real bash, completes kbuild."""
    import shutil
    import subprocess

    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out

    def complete(*words: str) -> list[str]:
        line = " ".join(words)
        probe = (f'COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE="{line}"; '
                 f'COMP_POINT={len(line)}; _shtab_kbuild; echo "${{COMPREPLY[@]}}"')
        done = subprocess.run(["bash", "-c", script + "\n" + probe], capture_output=True, text=True, check=True)
        return done.stdout.split()

    assert complete("kbuild", "bu") == ["build"]
    assert "--manylinux" in complete("kbuild", "build", "--man")
    assert set(complete("kbuild", "toolchain", "")) >= {"install", "list", "prune"}
