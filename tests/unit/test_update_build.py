"""`kbuild update-build`: edition 4 and 5 manifests rewritten as edition 6 in place, comments and
formatting kept, reading as the same kernel and planning the same variants; `--check` for CI;
nothing written when anything fails. File work only (no process): kbuild's own edition 4 fixture
(tests/fixtures/scale-edition4) and edition 5 manifest (tests/manifests/good), and every corpus
kernel where the corpus is (tests/helpers/corpus.py). That Hugging Face's parser reads the results
is tests/integration/test_hf_manifest_parity.py's."""

from __future__ import annotations

import difflib
import re
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
FIVE_CORPUS = sorted(p.parent for p in CORPUS.glob("*/build.toml") if re.search(r"^edition = 5", p.read_text(), re.M))
EDITION5 = MANIFESTS / "good" / "edition5-compiled"  # kbuild's own edition 5 kernel, here in every clone


def read(kernel: Path):
    """The manifest and the notices reading it gave (megablocks' also says it drops a capability)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = load_manifest(kernel)
    return m, [str(w.message) for w in caught]


def plan(m):
    """What the build would do (the variants, with their compile units, and what it skips), as
    kbuild variants plans it: dependencies (CUTLASS) named, not provisioned."""
    planned = plan_build(replace(inputs(m), dependency_includes=None))
    return planned.variants, planned.skipped, planned.failed


def renamed(text: str) -> list[str]:
    """`text`'s lines as edition 6 spells them: each kernel's backend as its language."""
    return [re.sub(r'^(\s*)backend = "(\w+)"', r'\1language = "cpp-\2"', line) for line in text.splitlines()]


def upgrade_and_compare(kernel: Path, capsys, edition: int) -> tuple[str, str]:
    """Upgrade `kernel` (edition 4 or 5) with --check first; the text before and after. The new file
    reads as the same kernel but for its edition, and plans the same variants."""
    before_text = (kernel / "build.toml").read_text()
    before, warned = read(kernel)
    assert any("edition 4 manifest" in w for w in warned) == (edition == 4), warned
    before_plan = plan(before)

    code, out = kbuild(capsys, kernel, "--check")
    assert code == 1 and "an upgrade is due ([general] edition = 6" in out, out
    assert (kernel / "build.toml").read_text() == before_text  # --check writes nothing

    code, out = kbuild(capsys, kernel)
    assert code == 0 and f"{kernel / 'build.toml'}: edition {edition} -> 6" in out, out
    after_text = (kernel / "build.toml").read_text()
    after, warned = read(kernel)
    assert not any("edition 4 manifest" in w for w in warned), warned
    assert after.edition == 6 and replace(after, edition=before.edition) == before
    assert plan(after) == before_plan

    code, out = kbuild(capsys, kernel, "--check")
    assert code == 0 and "edition 6, nothing to do" in out, out
    return before_text, after_text


def changed_lines(before: list[str], after: list[str]) -> list[str]:
    return [d for d in difflib.ndiff(before, after) if d[:2] in ("+ ", "- ")]





def kbuild(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["update-build", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.skipif(not present(), reason=ABSENT)
def test_the_corpus_has_edition_4_and_5_kernels_to_upgrade():
    assert len(OLD_CORPUS) >= 5 and len(FIVE_CORPUS) >= 2, (OLD_CORPUS, FIVE_CORPUS)


@pytest.mark.parametrize("source", [FIXTURE, *OLD_CORPUS], ids=lambda p: p.name)
def test_each_edition_4_kernel_is_upgraded_to_the_same_kernel(tmp_path, capsys, linux_x86_64, source):
    kernel = tmp_path / source.name
    shutil.copytree(source, kernel, ignore=shutil.ignore_patterns("build", ".kbuild"))
    before_text, after_text = upgrade_and_compare(kernel, capsys, 4)
    # one line added, each backend line renamed where it is; every other line (comments, order,
    # formatting) as it was
    assert changed_lines(renamed(before_text), after_text.splitlines()) == ["+ edition = 6"]
    assert not re.search(r"^backend = ", after_text, re.M)


@pytest.mark.parametrize("source", [EDITION5, *FIVE_CORPUS], ids=lambda p: p.name)
def test_each_edition_5_kernel_is_upgraded_to_the_same_kernel(tmp_path, capsys, linux_x86_64, source):
    kernel = tmp_path / source.name
    shutil.copytree(source, kernel, ignore=shutil.ignore_patterns("build", ".kbuild"))
    before_text, after_text = upgrade_and_compare(kernel, capsys, 5)
    # `edition = 5` becomes 6 where it is, each backend line is renamed: nothing else moves
    expected = [line.replace("edition = 5", "edition = 6") if line.startswith("edition = 5") else line
                for line in renamed(before_text)]
    assert after_text.splitlines() == expected


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
    assert "universal" not in after_text and "\n[torch-noarch]\n" in after_text and "edition = 6" in after_text
    assert replace(load_manifest(kernel), edition=5) == before


def test_noarch_capabilities_take_the_parsers_underscores_and_their_comments(tmp_path, capsys):
    kernel = tmp_path / "triton-layer-norm"
    shutil.copytree(MANIFESTS / "good" / "torch-noarch", kernel)
    text = (kernel / "build.toml").read_text()
    text = text.replace('cuda-capabilities = ["8.0", "9.0"]', 'cuda-capabilities = ["8.0", "9.0"]  # Ampere, Hopper')
    (kernel / "build.toml").write_text(text + 'rocm-archs = [\n  "gfx942",\n]\n')
    before = load_manifest(kernel)
    code, out = kbuild(capsys, kernel)
    assert code == 0 and "[torch-noarch] cuda-capabilities -> cuda_capabilities" in out, out
    after_text = (kernel / "build.toml").read_text()
    assert 'cuda_capabilities = ["8.0", "9.0"]  # Ampere, Hopper\n' in after_text
    assert 'rocm_archs = [\n  "gfx942",\n]\n' in after_text and "-capabilities" not in after_text
    assert replace(load_manifest(kernel), edition=5) == before


@pytest.mark.parametrize("section, exit_code, why", [
    # kbuild reads neuron sections (and never compiles them); edition 6 has no language for them
    ('[kernel.relu_neuron]\nbackend = "neuron"\ndepends = []\nsrc = ["csrc/relu.cu"]\n', 1,
     "[kernel.relu_neuron] backend: edition 6 has no language for neuron kernels"),
    # a file that does not read is kbuild check's error, as it says it
    ('[kernel.relu_cpu2]\nsrc = ["csrc/relu.cu"]\ndepends = []\nbackend.x = 1\n', 2,
     "[kernel.relu_cpu2] backend: expected a string"),
    ('[kernel]\nrelu_cpu2 = { backend = "cpu", depends = [], src = ["csrc/relu.cu"] }\n', 1,
     "[kernel.relu_cpu2] backend: kbuild update-build rewrites `backend = …` only as a line of its own"),
])
def test_what_cannot_be_rewritten_is_refused_and_nothing_written(tmp_path, capsys, section, exit_code, why):
    kernel = tmp_path / "relu"
    shutil.copytree(MANIFESTS / "bad" / "kernel-missing-backend", kernel)
    text = (kernel / "build.toml").read_text().replace('backends = ["cpu", "cuda"]', 'backends = ["cpu", "cuda", "neuron"]')
    text = text.replace('[kernel.relu]\n', '[kernel.relu]\nbackend = "cuda"\n') + "\n" + section
    (kernel / "build.toml").write_text(text)
    code, out = kbuild(capsys, kernel)
    assert code == exit_code and "Traceback" not in out and (kernel / "build.toml").read_text() == text, out
    assert len([line for line in out.splitlines() if "error:" in line]) == 1 and why in out, out


@pytest.mark.parametrize("source", [FIXTURE, EDITION5], ids=lambda p: p.name)
def test_crlf_line_ends_are_kept(tmp_path, capsys, source):
    kernel = tmp_path / source.name
    shutil.copytree(source, kernel)
    lf = (kernel / "build.toml").read_bytes()
    (kernel / "build.toml").write_bytes(lf.replace(b"\n", b"\r\n"))
    code, out = kbuild(capsys, kernel)
    assert code == 0, out
    after = (kernel / "build.toml").read_bytes()
    assert after.count(b"\n") == after.count(b"\r\n") == lf.count(b"\n") + (source == FIXTURE)  # + edition = 6


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
    assert code == 0 and "scale/build.toml: edition 4 -> 6" in out, out
