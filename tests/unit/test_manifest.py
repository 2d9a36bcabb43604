"""build.toml: a corpus of malformed manifests, each with the one-line error it must give.

Each folder under tests/manifests/bad/ is one case: a build.toml (plus any sources it names)
and an expect.txt holding what the error must say:

    # what the case covers (whole-line comments only)
    line: 15
    at: [kernel.relu] cuda-capabilities
    expect: unknown capability "9.5"
    expect: optional +PTX

`line` is the line the error names (or `none`), `at` the table and key (absent for TOML syntax
errors), each `expect` a fragment of what was expected. Optional: `source`, text that must be on
that line of build.toml; `warning`, a warning that must come with the error.

The message must read exactly `bad/<case>/build.toml:<line>: <at>: …` (paths are shown relative
to the working directory; the tests run from tests/manifests/). Good manifests live under
tests/manifests/good/.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from builder.backends.cuda_arch import Capability
from builder.commands.main import main
from builder.project.manifest import load_manifest
from builder.project.toml_lines import key_lines
from kbuild_common.errors import ManifestError

CORPUS = Path(__file__).resolve().parents[1] / "manifests"
BAD = sorted(p.name for p in (CORPUS / "bad").iterdir() if p.is_dir())
GOOD = sorted(p.name for p in (CORPUS / "good").iterdir() if p.is_dir())


@dataclass(frozen=True)
class Expect:
    line: int | None
    at: str | None
    fragments: tuple[str, ...]
    source: str | None = None
    warning: str | None = None

    @property
    def table_and_key(self) -> tuple[str, str]:
        table, _, key = self.at.partition("]")
        return table + "]", key.strip()


def read_expect(case: str) -> Expect:
    fields: dict[str, list[str]] = {}
    for raw in (CORPUS / "bad" / case / "expect.txt").read_text().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        name, sep, value = raw.partition(": ")
        assert sep and name in ("line", "at", "expect", "source", "warning"), f"{case}/expect.txt: bad line {raw!r}"
        fields.setdefault(name, []).append(value)
    line = fields["line"][0]
    return Expect(
        line=None if line == "none" else int(line), at=fields.get("at", [None])[0],
        fragments=tuple(fields.get("expect", ())), source=fields.get("source", [None])[0],
        warning=fields.get("warning", [None])[0],
    )


@pytest.fixture
def corpus(monkeypatch) -> Path:
    """Run from tests/manifests/, so messages name `bad/<case>/build.toml`."""
    monkeypatch.chdir(CORPUS)
    return CORPUS


def load_recording_warnings(path: Path):
    """(manifest or ManifestError, [warning texts])."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = load_manifest(path)
        except ManifestError as e:
            result = e
    return result, [str(w.message) for w in caught]


def expected_prefix(case: str, expect: Expect) -> str:
    loc = f"bad/{case}/build.toml" + (f":{expect.line}" if expect.line is not None else "")
    return f"{loc}: {expect.at}: " if expect.at else f"{loc}: "


# -- the corpus itself ------------------------------------------------------------------------


def test_corpus_is_large_enough_and_complete():
    assert len(BAD) >= 30
    for case in BAD:
        assert (CORPUS / "bad" / case / "build.toml").is_file(), case
        assert read_expect(case).fragments, f"{case}: expect.txt names no expected text"
    assert {"edition5-compiled", "edition6-compiled", "edition6-noarch", "edition4", "torch-noarch",
            "kernel-builder-relu"} <= set(GOOD)


@pytest.mark.parametrize("case", BAD)
def test_expected_line_is_where_the_problem_is(case):
    """Guards expect.txt itself: the line it names shows the key, the table or the quoted source."""
    expect = read_expect(case)
    if expect.line is None:
        return
    lines = (CORPUS / "bad" / case / "build.toml").read_text().splitlines()
    assert 1 <= expect.line <= len(lines), case
    text = lines[expect.line - 1]
    if expect.source is not None:
        assert expect.source in text
        return
    table, key = expect.table_and_key
    # A key is shown by `key =` (or `sub-key =` inside an inline table); a key that is not
    # written (missing) falls back to its table's header, and a table given as a key
    # (`relu = "…"` under [kernel]) by its last name.
    names = key.split(".") if key else [table.strip("[]").split(".")[-1]]
    assert text.startswith(table) or any(f"{name} =" in text for name in names), (
        f"{case}: line {expect.line} is {text!r}, which shows neither {table} nor {key!r}")


# -- malformed manifests ----------------------------------------------------------------------


@pytest.mark.parametrize("case", BAD)
def test_bad_manifest_error_names_file_line_key_and_expectation(case, corpus):
    expect = read_expect(case)
    error, warned = load_recording_warnings(Path("bad") / case)
    assert isinstance(error, ManifestError), f"{case} was accepted"
    message = str(error)
    assert "\n" not in message
    prefix = expected_prefix(case, expect)
    assert message.startswith(prefix), f"{message!r} does not start with {prefix!r}"
    for fragment in expect.fragments:
        assert fragment in message[len(prefix):], f"{fragment!r} not in {message!r}"
    if expect.warning:
        assert len(warned) == 1 and expect.warning in warned[0]
    else:
        assert warned == []


@pytest.mark.parametrize("case", BAD)
def test_check_command_prints_one_error_line(case, corpus, capsys):
    expect = read_expect(case)
    code = main(["check", f"bad/{case}"])
    out, err = capsys.readouterr()
    assert code == ManifestError.exit_code
    assert out == ""
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("kbuild: error:")]
    assert len(errors) == 1, err
    assert errors[0].startswith("kbuild: error: " + expected_prefix(case, expect))
    others = [line for line in err.splitlines() if line not in errors]
    assert all(line.startswith(("kbuild: warning:", "  hint:")) for line in others), err
    if expect.warning:
        assert any(expect.warning in line for line in others if line.startswith("kbuild: warning:"))


def test_error_outside_the_working_directory_shows_the_path_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    case = CORPUS / "bad" / "capability-9.5"
    error, _ = load_recording_warnings(case)
    assert str(error).startswith(f"{case / 'build.toml'}:15: [kernel.relu] cuda-capabilities: ")


def test_check_a_folder_without_build_toml(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == ManifestError.exit_code
    err = capsys.readouterr().err
    assert err.splitlines()[0] == f"kbuild: error: {tmp_path}: no build.toml here"
    assert "Traceback" not in err


def test_check_a_path_that_is_not_a_folder(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope")]) != 0
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("kbuild: error:")] == [
        f"kbuild: error: {tmp_path / 'nope'}: not a folder"]


# -- good manifests ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", GOOD)
def test_check_accepts_good_manifest(case, corpus, capsys):
    assert main(["check", f"good/{case}"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"good/{case}/build.toml: ok (")
    assert "kbuild: error" not in err and "Traceback" not in err


def test_edition5_compiled():
    m, warned = load_recording_warnings(CORPUS / "good" / "edition5-compiled")
    assert warned == []
    assert (m.name, m.python_name, m.version, m.edition, m.license) == ("fused-relu", "fused_relu", 2, 5, "Apache-2.0")
    assert m.backends == ("cpu", "cuda")
    assert m.python_depends == ("einops",)
    # [general.<backend>] dependencies belong to that backend's variants only, after [general]'s
    assert m.python_depends_for("cpu") == ("einops",)
    assert m.python_depends_for("cuda") == ("einops", "nvidia-cutlass-dsl")
    assert m.python_depends_for("xpu") == ("einops", "onednn")
    assert [d.as_metadata() for d in m.kernel_depends_for("cpu")] == [
        {"repo-id": "kernels-community/activation", "version": 1}]
    assert [d.as_metadata() for d in m.kernel_depends_for("cuda")] == [
        {"repo-id": "kernels-community/activation", "version": 1},
        {"repo-id": "kernels-community/rotary", "revision": "main"}]
    assert (m.hub_repo_id, m.hub_branch, m.cuda_minver, m.cuda_maxver) == (
        "kernels-community/fused-relu", "v2", "12.6", None)
    assert m.torch.src == ("torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h")
    assert (m.torch.include, m.torch.pyext, m.torch.minver) == (("include",), ("py", "pyi"), "2.10")
    assert m.torch.cxx_flags == ("-DFUSED_RELU_VERBOSE=0",)
    assert m.torch.stable_abi is None and m.noarch is None
    cuda, cpu = m.kernels
    assert (cuda.name, cuda.backend, cuda.depends) == ("relu_cuda", "cuda", ())
    # Duplicates collapse, order is kept, suffixes and +PTX are parsed.
    assert cuda.cuda_capabilities == (Capability(8, 0), Capability(9, 0, "a"), Capability(10, 0, "f", ptx=True))
    assert cuda.cuda_flags == ("-lineinfo",)
    assert (cpu.name, cpu.backend, cpu.depends, cpu.cxx_flags) == ("relu_cpu", "cpu", ("torch",), ("-march=x86-64-v3",))
    assert cpu.cuda_capabilities is None
    assert m.kernels_for("cuda") == (cuda,)


def test_edition6_reads_as_the_same_model_as_edition5():
    """Edition 6 spells a kernel's backend as its language and adds build-layout; the model the
    planner reads is edition 5's, but for the edition and the layout."""
    old, _ = load_recording_warnings(CORPUS / "good" / "edition5-compiled")
    new, warned = load_recording_warnings(CORPUS / "good" / "edition6-compiled")
    assert warned == []
    assert (new.edition, new.build_layout, old.build_layout) == (6, "zip", "files")
    assert [k.backend for k in new.kernels] == ["cuda", "cpu"]
    # the one other difference of the files: the CUDA section depends on the stable-ABI shim
    assert new.kernels[0].depends == ("torch-stable-abi-shim",)
    assert replace(new, path=old.path, edition=5, build_layout="files",
                   kernels=(replace(new.kernels[0], depends=()), new.kernels[1])) == old


def test_edition6_noarch_takes_the_parsers_underscores():
    m, warned = load_recording_warnings(CORPUS / "good" / "edition6-noarch")
    assert warned == [] and m.edition == 6 and m.torch is None and m.kernels == ()
    assert m.noarch.cuda_capabilities == (Capability(8, 0), Capability(9, 0)) and m.noarch.rocm_archs == ("gfx942",)


def test_edition5_noarch_takes_either_spelling_but_not_both(tmp_path):
    """kernel-builder's docs write cuda-capabilities, its parser (edition 5 too) cuda_capabilities."""
    text = (CORPUS / "good" / "torch-noarch" / "build.toml").read_text()
    (tmp_path / "build.toml").write_text(text.replace("cuda-capabilities", "cuda_capabilities"))
    m, _ = load_recording_warnings(tmp_path)
    assert m.noarch == load_manifest(CORPUS / "good" / "torch-noarch").noarch
    (tmp_path / "build.toml").write_text(text + 'cuda_capabilities = ["8.0"]\n')
    error, _ = load_recording_warnings(tmp_path)
    assert str(error).endswith("[torch-noarch] cuda_capabilities: cuda-capabilities and cuda_capabilities are one "
                               "key: write it once"), error


def test_edition4_is_upgraded_with_a_warning(corpus):
    m, warned = load_recording_warnings(Path("good") / "edition4")
    assert m.edition == 5
    assert (m.name, m.version, m.license, m.backends) == ("relu", 1, "Apache-2.0", ("cpu",))
    assert m.torch is not None and [k.name for k in m.kernels] == ["relu_cpu"]
    assert len(warned) == 1
    assert warned[0].startswith("good/edition4/build.toml: edition 4 manifest (no [general] edition)")
    assert "run `kbuild update-build` to rewrite it as edition 6" in warned[0]


def test_edition4_universal_is_a_noarch_kernel():
    m, warned = load_recording_warnings(CORPUS / "good" / "edition4-universal")
    assert len(warned) == 1
    assert m.torch is None and m.noarch is not None and m.kernels == ()


def test_check_prints_the_edition4_warning(corpus, capsys):
    assert main(["check", "good/edition4"]) == 0
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "kbuild: warning: good/edition4/build.toml: edition 4 manifest (no [general] edition) (its `version = 1` "
        "is the kernel's major version, not the format's), upgraded to edition 5 in memory; run `kbuild "
        "update-build` to rewrite it as edition 6"]


def test_torch_noarch():
    m, _ = load_recording_warnings(CORPUS / "good" / "torch-noarch")
    assert m.torch is None and m.kernels == ()
    assert m.backends == ("cuda", "rocm", "xpu")
    assert m.noarch.pyext == ("py", "json")
    assert m.noarch.cuda_capabilities == (Capability(8, 0), Capability(9, 0))
    assert m.license == "MIT"


def test_kernel_builder_relu_example():
    m, warned = load_recording_warnings(CORPUS / "good" / "kernel-builder-relu")
    assert warned == []
    assert m.backends == ("cpu", "cuda", "metal", "rocm", "xpu")
    assert {k.name: k.backend for k in m.kernels} == {
        "relu": "cuda", "relu_metal": "metal", "relu_rocm": "rocm", "relu_xpu": "xpu", "relu_cpu": "cpu"}
    rocm = m.kernels_for("rocm")[0]
    assert rocm.rocm_archs[0] == "gfx906" and len(rocm.rocm_archs) == 9
    assert m.kernels_for("metal")[0].src == ("relu_metal/relu.mm", "relu_metal/relu.metal", "relu_metal/common.h")
    assert m.upstream.endswith("/examples/kernels/relu")


# Line numbers survive multi-line arrays (with brackets in comments and strings), multi-line
# strings, spaced and quoted headers, dotted and inline-table keys.
LINES = {
    "kernel-builder-relu": {
        ("general", "backends"): 7,
        ("torch",): 15,
        ("torch", "src"): 16,
        ("kernel", "relu"): 21,
        ("kernel", "relu_metal", "src"): 28,
        ("kernel", "relu_metal", "depends"): 33,
        ("kernel", "relu_rocm", "rocm-archs"): 37,
        ("kernel", "relu_rocm", "depends"): 48,
        ("kernel", "relu_rocm", "src"): 49,
        ("kernel", "relu_xpu"): 51,
        ("kernel", "relu_cpu", "src"): 59,
    },
    "tricky-lines": {
        ("general",): 2,
        ("general", "name"): 3,
        ("general", "source"): 7,
        ("general", "backends"): 12,
        ("general", "hub", "repo-id"): 16,
        ("torch",): 18,
        ("torch", "cxx-flags"): 20,
        ("torch", "stable-abi"): 21,
        ("kernel", "tricky-cuda"): 23,
        ("kernel", "tricky-cuda", "depends"): 25,
        ("kernel", "tricky-cuda", "src"): 28,
        ("kernel", "tricky-cuda", "cuda-capabilities"): 31,
    },
}


@pytest.mark.parametrize("case", sorted(LINES))
def test_key_lines_in_good_manifests(case):
    path = CORPUS / "good" / case / "build.toml"
    text = path.read_text()
    lines = key_lines(text)
    for keys, number in LINES[case].items():
        assert lines.get(keys) == number, keys
        shown = text.splitlines()[number - 1]
        assert keys[-1] in shown.replace('"', ""), (keys, shown)
    # Nothing inside the multi-line string or the arrays was taken for a key or a table.
    assert ("not-a-table",) not in lines and ("general", "not-a-table") not in lines


def test_where_names_file_line_table_and_key(corpus):
    m, _ = load_recording_warnings(Path("good") / "kernel-builder-relu")
    assert m.where("kernel", "relu_rocm", "depends") == "good/kernel-builder-relu/build.toml:48: [kernel.relu_rocm] depends"
    # A key that is not written falls back to its table's header.
    assert m.where("kernel", "relu", "cuda-capabilities") == "good/kernel-builder-relu/build.toml:21: [kernel.relu] cuda-capabilities"
    assert m.where("general", "hub", "repo-id") == "good/kernel-builder-relu/build.toml:1: [general.hub] repo-id"


def test_key_lines_small_cases():
    text = (
        'a = [\n'          # 1
        '  "]",  # [\n'    # 2
        ']\n'              # 3
        'b = 1\n'          # 4
        "c = '''\n"        # 5
        'd = 2\n'          # 6
        "'''\n"            # 7
        '[t . "x.y"]\n'    # 8
        'e.f = { g = [1, [2]] }\n'  # 9
        'h = 3\n'          # 10
        '[[arr]]\n'        # 11
        'i = 4\n'          # 12
    )
    assert key_lines(text) == {
        ("a",): 1, ("b",): 4, ("c",): 5, ("t",): 8, ("t", "x.y"): 8, ("t", "x.y", "e"): 9, ("t", "x.y", "e", "f"): 9,
        ("t", "x.y", "h"): 10, ("arr",): 11, ("arr", "i"): 12,
    }
