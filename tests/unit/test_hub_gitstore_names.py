"""The git hub's repo ids, paths and folder layout, checked without git."""

from __future__ import annotations

import pytest

from kbuild_hub.errors import InvalidPath, InvalidRepoId
from kbuild_hub.gitstore import GitStore

# -- names ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("repo_id", ["org/name", "a/b", "Org-1/na.me_2", "x/" + "a" * 96, "o/name_"])
def test_valid_repo_ids(tmp_path, repo_id):
    assert GitStore(tmp_path).validate_repo_id(repo_id) == tuple(repo_id.split("/"))


@pytest.mark.parametrize("repo_id", [
    "", "name", "a/b/c", "/a", "a/", "../a", "a/..", "./a", "a/.b", "a/-b", "a/b-", "a/b.", "a/b--c", "a/b..c",
    "a/" + "x" * 97, "a/b.git", "a b/c", "a/b%2e", "a\\b/c", "a/b\x00", "%2e%2e/x", "a/ü",
])
def test_invalid_repo_ids(tmp_path, repo_id):
    with pytest.raises(InvalidRepoId):
        GitStore(tmp_path).validate_repo_id(repo_id)


def test_repo_dir_layout_and_types(tmp_path):
    s = GitStore(tmp_path)
    assert s.repo_dir("kernel", "org/name") == tmp_path / "kernels" / "org" / "name.git"
    assert s.repo_dir("dataset", "o/d") == tmp_path / "datasets" / "o" / "d.git"
    with pytest.raises(InvalidRepoId, match="repo type"):
        s.repo_dir("kernels", "org/name")


@pytest.mark.parametrize(("path", "normal"), [
    ("a", "a"), ("a/b.txt", "a/b.txt"), ("build/torch-cuda/x.so", "build/torch-cuda/x.so"),
    (".gitattributes", ".gitattributes"), (".github/ci.yml", ".github/ci.yml"), ("a//b/", "a/b"),
    ("100%.txt", "100%.txt"), ("file%20name", "file%20name"), ("x..y", "x..y"), ("...", "..."), ("ü/é", "ü/é"),
])
def test_valid_paths(tmp_path, path, normal):
    assert GitStore(tmp_path).validate_path(path) == normal


@pytest.mark.parametrize("path", [
    "", "/", "/etc/passwd", "../x", "a/../b", "a/..", "a/./b", ".", "..", "a\\b", "..\\x", "a\x00b", "a\nb", "a\tb",
    "a\x7f", "%2e%2e/x", "a/%2E%2E/b", "%252e%252e/x", "..%2fx", "a%5cb", "%00x", "%2fetc", ".git", ".git/config",
    "a/.git/x", ".GIT/x", ".git./x", "a/.git", "C:/x", "a/" + "x" * 256,
])
def test_invalid_paths(tmp_path, path):
    with pytest.raises(InvalidPath):
        GitStore(tmp_path).validate_path(path)
