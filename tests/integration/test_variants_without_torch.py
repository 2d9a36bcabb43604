"""`kbuild variants` with a Python that has no torch: the rows are listed, none is marked as this
environment's, and a warning says why (the torch probe's own error) instead of nothing."""

from __future__ import annotations

import subprocess
import sys

from builder.commands.main import main
from cpu_kernel import write_cpu_kernel


def test_variants_without_torch_says_that_torch_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    venv = tmp_path / "no-torch"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    kernel = write_cpu_kernel(tmp_path / "k", "kk", "int kk_value() { return 1; }\n")
    python = venv / "bin" / "python"
    assert main(["variants", str(kernel), "--python", str(python)]) == 0
    out, err = capsys.readouterr()
    rows = out.splitlines()
    assert rows and all(row.startswith("kk: ") and "[this environment]" not in row for row in rows), out
    assert (f"kbuild: warning: this environment builds none of these variants: cannot import torch with {python}: "
            "ModuleNotFoundError: No module named 'torch'") in err

    # with torch (the one running the tests) its variant is marked, and nothing is said
    assert main(["variants", str(kernel)]) == 0
    out, err = capsys.readouterr()
    assert "[this environment]" in out and "builds none of these variants" not in err
