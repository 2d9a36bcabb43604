"""Where the tests find the kernel corpus: real kernel-builder projects (relu, flash-attn2, …) used as
read-only test data. CI keeps it in a `shared/corpus` folder beside the checkout; a fresh clone has
none, and every test that needs it skips saying so. `KBUILD_CORPUS` names another folder, and one
that does not exist hides the corpus: tests/integration/test_fresh_clone.py runs the suite's
collection and the corpus tests that way, so a test that needs the corpus and does not skip without
it fails there, not in a newcomer's first run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENV = "KBUILD_CORPUS"
CORPUS = Path(os.environ[ENV]) if os.environ.get(ENV) else REPO.parent / "shared" / "corpus"
ABSENT = f"no kernel corpus at {CORPUS} (set {ENV} to a folder of kernel-builder projects)"


def present() -> bool:
    return CORPUS.is_dir()


def corpus_kernel(name: str) -> Path:
    """The corpus kernel `name`; the calling test skips, saying where it looked, when it is not there."""
    folder = CORPUS / name
    if not (folder / "build.toml").is_file():
        pytest.skip(f"no corpus kernel {name}: {ABSENT}")
    return folder
