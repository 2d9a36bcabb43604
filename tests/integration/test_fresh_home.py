"""What a newcomer's fresh machine (an empty HOME: no matplotlib font cache) meets in the unit
tests: the plotting tests pass there, in either order, though building matplotlib's font cache runs
`fc-list`, which the pure-unit-test guard refuses (tests/unit/conftest.py builds it before any test).
The README's quick start without a git identity is tests/integration/test_quick_start.py's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLOT_TESTS = "tests/unit/test_peers_plot.py"


def fresh_env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "PYTEST_ADDOPTS")}
    return {**env, "HOME": str(home)}


@pytest.mark.parametrize("order", ["file", "reversed"])
def test_the_plotting_unit_tests_pass_with_an_empty_home(tmp_path, order):
    home = tmp_path / "home"
    home.mkdir()
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", "-q", PLOT_TESTS]
    if order == "reversed":  # the svg test first: whichever test draws first finds no font cache
        args[-1:] = [f"{PLOT_TESTS}::test_the_svg_is_the_same_bytes_each_time", PLOT_TESTS]
    done = subprocess.run(args, cwd=REPO, env=fresh_env(home), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout and "error" not in done.stdout.splitlines()[-1]
