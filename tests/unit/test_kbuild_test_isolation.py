"""`kbuild test` runs a kernel's tests in isolation from the folders around it, and gives tests that
load their kernel through Hugging Face's loader (`kernels.get_kernel("<repo-id>", ...)`) the
variant under test.

The integration tests build a copy of the corpus's relu kernel (its CPU variant, about half a
minute) inside a folder whose pytest.ini and conftest.py would break any test run they reach.
"""

from __future__ import annotations

import pytest

from builder.config.environment import from_environment
from builder.verify.kernel_tests import _hub_env, _own_pytest_config

REPO_ID = "kernels-community/relu"


# --- the helpers, pure -----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "text", "found"), [
    ("pytest.ini", "", True),  # a pytest.ini counts even without a [pytest] section
    ("pytest.toml", "[pytest]\n", True),
    ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-ra'\n", True),
    ("pyproject.toml", "[tool.pytest]\naddopts = ['-ra']\n", True),
    ("pyproject.toml", "[project]\nname = 'x'\n", False),
    ("tox.ini", "[tox]\nenvlist = py311\n\n[pytest]\naddopts = -ra\n", True),
    ("tox.ini", "[tox]\nenvlist = py311\n", False),
    ("setup.cfg", "[metadata]\nname = x\n[tool:pytest]\naddopts = -ra\n", True),
    ("setup.cfg", "[metadata]\nname = x\n", False),
])
def test_own_pytest_config_is_found_only_where_pytest_would_read_it(tmp_path, name, text, found):
    (tmp_path / name).write_text(text)
    assert _own_pytest_config(tmp_path) == (tmp_path / name if found else None)


def test_own_pytest_config_follows_pytests_order(tmp_path):
    (tmp_path / "setup.cfg").write_text("[tool:pytest]\n")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    assert _own_pytest_config(tmp_path) == tmp_path / "pyproject.toml"
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    assert _own_pytest_config(tmp_path) == tmp_path / "pytest.ini"


def test_own_pytest_config_ignores_parent_folders(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "kernel").mkdir()
    assert _own_pytest_config(tmp_path / "kernel") is None


def test_hub_env_sets_nothing_without_a_repo_id(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    assert _hub_env(None, tmp_path, from_environment()) == {}


def test_hub_env_keeps_the_callers_other_local_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_KERNELS", f"org/a=/a::{REPO_ID}=/stale:org/b=/b")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    env = _hub_env(REPO_ID, tmp_path, from_environment())
    assert env == {"LOCAL_KERNELS": f"org/a=/a:org/b=/b:{REPO_ID}={tmp_path.resolve()}", "HF_HUB_OFFLINE": "1"}


def test_hub_env_leaves_an_explicit_hf_hub_offline_alone(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert _hub_env(REPO_ID, tmp_path, from_environment()) == {"LOCAL_KERNELS": f"{REPO_ID}={tmp_path.resolve()}"}


def test_a_collection_error_is_named_in_the_outcome():
    from builder.verify.kernel_tests import _outcome_line

    output = ("==================================== ERRORS ====================================\n"
              "______________________ ERROR collecting tests/test_quant.py ______________________\n"
              "ImportError while importing test module '/k/tests/test_quant.py'.\n"
              "tests/test_quant.py:5: in <module>\n    from sage_attention import per_block_int8\n"
              "E   ImportError: undefined symbol: _Z50qk_int8_sv_f8\n"
              "=========================== short test summary info ============================\n"
              "ERROR tests/test_quant.py\n"
              "!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!!\n"
              "1 error in 4.48s\n")
    assert _outcome_line(output) == ("1 error in 4.48s; error collecting (importing) tests/test_quant.py: "
                                     "ImportError: undefined symbol: _Z50qk_int8_sv_f8")
    assert _outcome_line("...\n3 passed in 1.0s\n") == "3 passed in 1.0s"
