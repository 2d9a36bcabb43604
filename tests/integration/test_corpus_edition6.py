"""Issue 44: corpus kernels rewritten as edition 6 by `kbuild update-build` build and pass their own
suites on CPU as their originals do (tests/integration/test_corpus_build.py runs the originals):
relu (edition 4, a compiled CPU section) and einops (edition 5, Python-only). That every corpus
kernel's rewrite plans the same variants is tests/unit/test_update_build.py's; that Hugging Face's
parser reads the rewrites, tests/integration/test_hf_manifest_parity.py's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from builder.commands.main import main
from corpus import ABSENT, CORPUS, present

if not present():
    pytest.skip(ABSENT, allow_module_level=True)
pytest.importorskip("torch")

# kernel -> the variant this machine builds and tests (as test_corpus_build.py does for the originals)
CASES = {"relu": "-cpu-x86_64-linux", "einops": "torch-cpu"}


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=kbuild-tests", "-c", "user.email=tests@kbuild.invalid",
                    "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory) -> Path:
    """The cases copied into one git repository, upgraded to edition 6 and committed (a build is
    named after its kernel folder's git tree)."""
    root = tmp_path_factory.mktemp("edition6") / "corpus"
    for name in CASES:
        shutil.copytree(CORPUS / name, root / name, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
        assert main(["update-build", str(root / name)]) == 0
        assert re.search(r"^edition = 6$", (root / name / "build.toml").read_text(), re.M)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "corpus, edition 6"]):
        git(root, *args)
    return root


@pytest.mark.parametrize("name", list(CASES))
def test_an_edition_6_rewrite_builds_and_passes_its_suite(rewritten, name, capsys):
    kernel = rewritten / name
    capsys.readouterr()
    assert main(["variants", str(kernel), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    (variant,) = [r["variant"] for r in rows if r.get("here") and r["variant"].endswith(CASES[name])]
    assert main(["build", str(kernel), "--variant", variant]) == 0, capsys.readouterr()
    metadata = json.loads((kernel / "build" / variant / "metadata.json").read_text())
    # a compiled variant records the edition it was read as; a Python-only one records no toolchain
    toolchain = metadata["provenance"].get("toolchain")
    assert (toolchain["edition"] if toolchain else None) == (6 if name == "relu" else None), toolchain
    code = main(["test", str(kernel), "--variant", variant, "--", "-rs"])
    log = (kernel / ".kbuild" / variant / "test.log").read_text()
    assert code == 0 and re.search(r"\d+ passed", log) and not re.search(r"\d+ (failed|error)", log), log[-3000:]
