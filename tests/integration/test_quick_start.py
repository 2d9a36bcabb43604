"""The README's quick start ("A kernel of your own, from nothing to loaded"), run word for word in
bash from the checkout's root: the project lands outside the checkout, in a repository of its own,
and the last line prints the kernel's result. HOME is a fresh folder, so the local hub and the
caches are this test's, and there is no git identity, as on a fresh machine."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADING = "A kernel of your own, from nothing to loaded"


def quick_start(readme: str) -> str:
    """The first bash block after the quick start's sentence."""
    assert HEADING in readme, f"README.md no longer has the quick start ({HEADING!r})"
    block = re.search(r"```bash\n(.*?)```", readme.split(HEADING, 1)[1], re.S)
    assert block, "no bash block after the quick start's sentence"
    return block.group(1)


def run_quick_start(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    # no git identity: a fresh machine has none (the README's block gives its repository one)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBUILD_", "HF_", "TORCH_CUDA_ARCH", "GIT_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), GIT_CONFIG_NOSYSTEM="1")
    # the compile cache stays the machine's: a cold one only costs time
    env["CCACHE_DIR"] = os.environ.get("CCACHE_DIR") or str(Path.home() / ".cache" / "kbuild" / "compile")
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)


def status_of_the_checkout() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout


def test_the_readme_quick_start_works_word_for_word(tmp_path):
    script = quick_start((ROOT / "README.md").read_text(encoding="utf-8"))
    before = status_of_the_checkout()
    done = run_quick_start(script, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "tensor([2., 2., 2.])", done.stdout[-2000:]
    (project,) = (tmp_path / "tmp").glob("*/my-scale")  # outside the checkout ...
    assert (project / ".git").is_dir()  # ... in a repository of its own, which holds the commit
    log = subprocess.run(["git", "-C", str(project), "log", "--format=%s"], capture_output=True, text=True)
    assert log.stdout.split() == ["v1"]
    assert "my-scale" not in status_of_the_checkout().replace(before, "")
    assert (tmp_path / "home" / ".cache" / "kbuild" / "hub" / "kernels" / "me" / "my-scale.git").is_dir()


def test_the_quick_starts_commit_works_without_a_git_identity(tmp_path):
    """Its lines up to `git commit`, on a machine with no git identity (an empty HOME): the block
    itself gives the new repository one, where the commit needs it."""
    script = quick_start((ROOT / "README.md").read_text(encoding="utf-8"))
    lines = script.splitlines()
    upto = next(n for n, line in enumerate(lines) if "git commit" in line)
    done = run_quick_start("\n".join(lines[:upto + 1]) + "\n", tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (project,) = (tmp_path / "tmp").glob("*/my-scale")
    log = subprocess.run(["git", "-C", str(project), "log", "--format=%s %ae"], capture_output=True, text=True)
    assert log.stdout.splitlines() == ["v1 me@example.com"], log
