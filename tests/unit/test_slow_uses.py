"""The slow marker comes from what a test uses (tests/helpers/slow_uses.py): read here on small test
modules written for the purpose, from their source as the collection hook reads it."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest

from slow_uses import slow_reason

MODULE = '''
import subprocess, sys
from builder.commands.main import main
from sccache_dist import sccache_dist


def git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd)


def kbuild(*args):
    return subprocess.run([sys.executable, "-m", "builder.commands.main", *args])


def run(capsys, *args):
    return main(list(args))


def built(tmp_path):
    assert main(["build", str(tmp_path)]) == 0


def test_builds_in_process(tmp_path):
    assert main(["build", str(tmp_path)]) == 0


def test_builds_through_a_helper_process(tmp_path):
    kbuild("build", str(tmp_path))


def test_builds_through_a_helper_with_capsys(capsys, tmp_path):
    run(capsys, "build", str(tmp_path))


def test_builds_through_its_fixture(built):
    pass


def test_builds_in_a_nested_helper(tmp_path):
    def cli(*args):
        return main(list(args))
    cli("build", str(tmp_path))


def test_imports_main_in_its_body(tmp_path):
    from builder.commands.main import main as kbuild_main
    kbuild_main(["toolchain", "install", "cuda-13.2"])


def test_installs_with_pip(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "huggingface_hub==1.33.0"])


def test_starts_sccache_dist(tmp_path):
    with sccache_dist(tmp_path):
        pass


def test_git_init_and_a_build_folder_are_not_builds(tmp_path):
    git(tmp_path, "init", "-q")
    assert not (tmp_path / "build").exists()
    main(["check", str(tmp_path)])


def test_publishes_only(tmp_path):
    main(["publish", str(tmp_path), "--hub", str(tmp_path / "hub")])
'''


@pytest.fixture(scope="module")
def module(tmp_path_factory):
    path = tmp_path_factory.mktemp("slow") / "test_slow_example.py"
    path.write_text(textwrap.dedent(MODULE))
    spec = importlib.util.spec_from_file_location("test_slow_example", path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded  # slow_reason finds the module's namespace there
    spec.loader.exec_module(loaded)
    yield loaded
    del sys.modules[spec.name]


@pytest.mark.parametrize("name, fixtures, why", [
    ("test_builds_in_process", (), "kbuild build"),
    ("test_builds_through_a_helper_process", (), "kbuild build"),
    ("test_builds_through_a_helper_with_capsys", ("capsys",), "kbuild build"),
    ("test_builds_through_its_fixture", ("built",), "kbuild build"),
    ("test_builds_in_a_nested_helper", (), "kbuild build"),
    ("test_imports_main_in_its_body", (), "kbuild toolchain install"),
    ("test_installs_with_pip", (), "pip install"),
    ("test_starts_sccache_dist", (), "sccache_dist.sccache_dist"),
    ("test_publishes_only", ("torch213_python",), "fixture torch213_python"),
])
def test_what_makes_a_test_slow(module, name, fixtures, why):
    reason = slow_reason(getattr(module, name), fixtures)
    assert reason and reason.startswith(why), reason


@pytest.mark.parametrize("name", ["test_git_init_and_a_build_folder_are_not_builds", "test_publishes_only"])
def test_what_does_not(module, name):
    assert slow_reason(getattr(module, name), ()) is None
