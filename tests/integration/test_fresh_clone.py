"""The test command passes in a fresh clone, which has no kernel corpus beside it: the whole suite is
collected, and the unit tests that read the corpus are run, in a pytest of their own with the corpus
hidden (KBUILD_CORPUS pointing at a folder that does not exist, tests/helpers/corpus.py). A test
that opens the corpus without going through tests/helpers/corpus.py, or that needs it and does not
skip without it, fails here instead of in a newcomer's first run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from corpus import ENV

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
HELPER = TESTS / "helpers" / "corpus.py"
HERE = Path(__file__).resolve()
# what reaching for the corpus folder by hand looks like: a "shared" path part beside the checkout (joined with /
# or named beside "corpus"; a "shared" dictionary key, such as a results file's row, is no path)
BY_HAND = re.compile(r"""["']shared["']\s*/|/\s*["']shared["']|["']shared["']\s*,\s*["']corpus"""
                     r"""|/shared/corpus|\.\./shared""")


def without_corpus(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, ENV: str(tmp_path / "no-corpus-here")}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def corpus_unit_tests() -> list[str]:
    """The unit test files that read the corpus (through tests/helpers/corpus.py)."""
    return sorted(str(p.relative_to(REPO)) for p in (TESTS / "unit").glob("test_*.py")
                  if re.search(r"^from corpus import", p.read_text(), re.M))


def test_no_test_reaches_for_the_corpus_folder_by_hand():
    found = [f"{p.relative_to(REPO)}:{n}: {line.strip()}"
             for p in sorted(TESTS.rglob("*.py")) if p not in (HELPER, HERE) and "fixtures" not in p.parts
             for n, line in enumerate(p.read_text().splitlines(), 1) if BY_HAND.search(line)]
    assert found == [], "find the corpus with tests/helpers/corpus.py (it skips when absent):\n" + "\n".join(found)


def test_the_whole_suite_collects_without_the_corpus(tmp_path):
    done = without_corpus(tmp_path, "--collect-only", "-q", "tests")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = re.search(r"(\d+) tests? collected", done.stdout)
    assert collected and int(collected[1]) > 1000, done.stdout[-2000:]
    assert "error" not in done.stdout.splitlines()[-1].lower(), done.stdout[-2000:]


def test_the_unit_tests_that_read_the_corpus_pass_without_it(tmp_path):
    files = corpus_unit_tests()
    assert "tests/unit/test_update_build.py" in files, files
    done = without_corpus(tmp_path, "-q", "-rs", *files)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    # what needs the corpus said why it skipped; what needs only kbuild's own fixtures ran
    assert f"no kernel corpus at {tmp_path / 'no-corpus-here'}" in out, out[-3000:]
    assert re.search(r"\d+ passed", out) and " failed" not in out, out[-2000:]

