"""`kbuild update-build`: edition 4 manifests rewritten as edition 5 in place, comments and formatting
kept, reading as the same kernel and planning the same variants; `--check` for CI; nothing written
when anything fails. File work only (no process): kbuild's own edition 4 fixture
(tests/fixtures/scale-edition4), and every corpus kernel still on edition 4 where the corpus is
(tests/helpers/corpus.py)."""

from __future__ import annotations

import difflib
import shutil
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from builder.commands.main import main
from builder.plan.steps import plan_build
from builder.project.manifest import load_manifest
from corpus import ABSENT, CORPUS, present
from plan_inputs import inputs, linux_x86_64  # noqa: F401 (fixture)

TESTS = Path(__file__).resolve().parents[1]
MANIFESTS = TESTS / "manifests"
FIXTURE = TESTS / "fixtures" / "scale-edition4"  # kbuild's own edition 4 kernel, here in every clone
OLD_CORPUS = sorted(p.parent for p in CORPUS.glob("*/build.toml") if "edition" not in p.read_text())


def read(kernel: Path):
    """The manifest and the notices reading it gave (megablocks' also says it drops a capability)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = load_manifest(kernel)
    return m, [str(w.message) for w in caught]


def plan(m):
    # as kbuild variants plans: dependencies (CUTLASS) named, not provisioned
    return plan_build(replace(inputs(m), dependency_includes=None))


def kbuild(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["update-build", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.skipif(not present(), reason=ABSENT)
def test_the_corpus_has_edition_4_kernels_to_upgrade():
    assert len(OLD_CORPUS) >= 5, OLD_CORPUS


@pytest.mark.parametrize("source", [FIXTURE, *OLD_CORPUS], ids=lambda p: p.name)
def test_each_edition_4_kernel_is_upgraded_to_the_same_kernel(tmp_path, capsys, linux_x86_64, source):
    kernel = tmp_path / source.name
    shutil.copytree(source, kernel, ignore=shutil.ignore_patterns("build", ".kbuild"))
    before_text = (kernel / "build.toml").read_text()
    before, warned = read(kernel)
    assert any("edition 4 manifest" in w for w in warned), warned
    before_plan = plan(before)

    code, out = kbuild(capsys, kernel, "--check")
    assert code == 1 and "an upgrade is due ([general] edition = 5)" in out, out
    assert (kernel / "build.toml").read_text() == before_text  # --check writes nothing

    code, out = kbuild(capsys, kernel)
    assert code == 0 and f"{kernel / 'build.toml'}: edition 4 -> 5" in out, out
    after_text = (kernel / "build.toml").read_text()
    # one line added, every other line (comments, order, formatting) as it was
    added = [d for d in difflib.ndiff(before_text.splitlines(), after_text.splitlines()) if d[:2] in ("+ ", "- ")]
    assert added == ["+ edition = 5"], added
    after, warned = read(kernel)
    assert not any("edition 4 manifest" in w for w in warned), warned
    assert after == before and plan(after) == before_plan

    code, out = kbuild(capsys, kernel, "--check")
    assert code == 0 and "edition 5, nothing to do" in out, out


def test_universal_becomes_a_torch_noarch_table_and_comments_stay(tmp_path, capsys):
    kernel = tmp_path / "silu-triton"
    shutil.copytree(MANIFESTS / "good" / "edition4-universal", kernel)
    text = (kernel / "build.toml").read_text().replace("[general]\n", "# the kernel\n[general]  # its identity\n")
    (kernel / "build.toml").write_text(text)
    with pytest.warns(Warning, match="edition 4 manifest"):
        before = load_manifest(kernel)
    code, out = kbuild(capsys, kernel)
    assert code == 0 and "[general] universal = true -> [torch-noarch]" in out, out
    after_text = (kernel / "build.toml").read_text()
    assert after_text.startswith("# the kernel\n[general]  # its identity\n"), after_text
    assert "universal" not in after_text and "\n[torch-noarch]\n" in after_text and "edition = 5" in after_text
    assert load_manifest(kernel) == before


def test_a_bad_manifest_in_a_workspace_writes_nothing(tmp_path, capsys):
    shutil.copytree(FIXTURE, tmp_path / "kernels" / "scale")
    shutil.copytree(MANIFESTS / "bad" / "edition-4-missing-license", tmp_path / "kernels" / "broken")
    (tmp_path / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n')
    before = {p: p.read_text() for p in tmp_path.glob("kernels/*/build.toml")}
    code, out = kbuild(capsys, tmp_path)
    assert code == 2, out
    assert "[general] license" in out and "missing required key" in out and "Traceback" not in out, out
    assert {p: p.read_text() for p in before} == before  # scale was fine, and is still untouched
    # alone, scale is upgraded: it was left as it was for the broken member's sake
    shutil.rmtree(tmp_path / "kernels" / "broken")
    code, out = kbuild(capsys, tmp_path)
    assert code == 0 and "scale/build.toml: edition 4 -> 5" in out, out
