"""Unit tests are pure: each one fails if it starts a process (tests/conftest.py's no_subprocess).
Tests that start processes or servers belong in tests/integration/."""

import contextlib

import pytest

# Importing torch runs `ldconfig -p` once (cuda.pathfinder's ctypes.util.find_library): import it
# here, before any test, so that the first test to touch torch is not taken for starting a process.
with contextlib.suppress(ImportError):
    import torch  # noqa: F401

# Importing matplotlib's font_manager builds its font cache when there is none (a fresh HOME) by
# running `fc-list`: build it here too, so the plotting tests pass on a fresh machine in any order.
with contextlib.suppress(ImportError):
    import matplotlib.font_manager  # noqa: F401


@pytest.fixture(autouse=True)
def _pure(no_subprocess):
    """Every test under tests/unit/ runs with processes refused."""
