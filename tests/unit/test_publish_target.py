"""resolve_target: where `kbuild publish` pushes. --branch wins (checked against the version unless --force), then
[general.hub] branch, then v<version>; a kernel without any of them is a one-line usage error."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from builder.publish.publish import PublishError, PublishOptions, resolve_target
from kbuild_common.errors import UsageError


def manifest(branch=None, repo_id="org/k"):
    return SimpleNamespace(path=Path("k/build.toml"), hub_repo_id=repo_id, hub_branch=branch,
                           where=lambda *keys: "k/build.toml [" + ".".join(keys) + "]")


def options(**kw):
    return PublishOptions(folder=Path("k"), **kw)


def test_the_branch_comes_from_the_option_the_manifest_or_the_version():
    assert resolve_target(manifest(), options(branch="v3"), 3) == ("org/k", "v3")
    assert resolve_target(manifest(), options(branch="main", force=True), 3) == ("org/k", "main")
    assert resolve_target(manifest(branch="v2"), options(), 5) == ("org/k", "v2")
    assert resolve_target(manifest(), options(), 4) == ("org/k", "v4")
    assert resolve_target(manifest(), options(repo_id="me/x"), 1) == ("me/x", "v1")


def test_without_a_version_or_a_branch_it_says_which_to_set():
    with pytest.raises(UsageError, match=r"k/build.toml: no version: set \[general\] version or pass --branch vN"):
        resolve_target(manifest(), options(), None)
    with pytest.raises(UsageError, match="no repo id"):
        resolve_target(manifest(repo_id=None), options(), 1)


def test_a_branch_that_is_not_the_version_is_refused():
    with pytest.raises(PublishError, match="--branch v2 does not match"):
        resolve_target(manifest(), options(branch="v2"), 3)
    with pytest.raises(PublishError, match="branch 'main' is not v<N>"):
        resolve_target(manifest(branch="main"), options(), 3)
