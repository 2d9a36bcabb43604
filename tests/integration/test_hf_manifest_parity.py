"""build.toml parity with Hugging Face's own parser (issue 44): kernels 0.19.1's
`kernels._rust.Build.open` (kernels-data's v4/v5/v6 readers, run in the kernels-0.19 environment of
tests/helpers/hf_envs.py) and kbuild read the same files, and each is accepted by both or refused by
both, but for the differences listed below, each with why; a listed difference that is gone fails
too, so the list stays true. The files: every manifest of tests/manifests (good and bad, editions
4 to 7), and the edition 6 rewrites `kbuild update-build` makes of kbuild's own kernels and of the
corpus kernels (where the corpus is), which the parser must accept.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

import hf_envs
from builder.commands.main import main
from builder.project.manifest import load_manifest
from corpus import CORPUS
from kbuild_common.errors import ManifestError

TESTS = Path(__file__).resolve().parents[1]
MANIFESTS = TESTS / "manifests"
CASES = sorted(f"{kind}/{p.name}" for kind in ("good", "bad") for p in (MANIFESTS / kind).iterdir() if p.is_dir())

# Runs in the Hugging Face environment: each folder -> None (accepted) or the parser's error.
PARSE = """
import json, sys
from kernels._rust import Build
out = {}
for folder in sys.argv[1:]:
    try:
        Build.open(folder)
        out[folder] = None
    except ValueError as e:
        out[folder] = " ".join(str(e).split())
print(json.dumps(out))
"""

_FILES = "the parser does not look at the files a manifest names; kbuild checks they are there"
_CAPS = "the parser takes any capability string; kbuild checks each against the archs nvcc knows"
_DEPS = "python-depends is checked against the allow-list when a variant's metadata.json is loaded; kbuild checks at once"
# case -> (kbuild accepts it, why the two differ)
DIFFERENCES = {
    "bad/backends-empty": (False, "the parser takes an empty [general] backends; kbuild wants one to build"),
    "bad/capability-8.0x": (False, _CAPS),
    "bad/capability-9.5": (False, _CAPS),
    "bad/capability-empty": (False, "an empty cuda-capabilities would build nothing; the parser takes it"),
    "bad/capability-lowercase-ptx": (False, _CAPS),
    "bad/capability-multiline": (False, _CAPS),
    "bad/capability-suffix-before-9.0": (False, _CAPS),
    "bad/edition-6-language-not-in-backends": (False, "a section of a backend [general] does not list would "
                                                      "never be built; the parser takes it"),
    "bad/edition-6-mlx-noarch": (False, "MLX kernels: kbuild does not build them"),
    "bad/edition-6-rust": (False, "Rust kernels: kbuild does not build them"),
    "bad/kernel-backend-not-in-general": (False, "as edition-6-language-not-in-backends, in edition 5"),
    "bad/kernel-depends-bad-repo-id": (False, "the parser takes any string as a kernel dependency's repo-id"),
    "bad/noarch-with-kernels": (False, "a [torch-noarch] kernel has no compiled sections to build; the parser "
                                       "takes them"),
    "bad/python-depends-backend-in-general": (False, _DEPS),
    "bad/python-depends-other-backend": (False, _DEPS),
    "bad/python-depends-unknown": (False, _DEPS),
    "bad/src-absolute": (False, _FILES),
    "bad/src-dotdot": (False, _FILES),
    "bad/src-not-found": (False, _FILES),
    "bad/src-several-not-found": (False, _FILES),
    "bad/torch-src-not-found": (False, _FILES),
    "bad/torch-without-src": (False, "[torch] without binding sources builds no extension; the parser takes it"),
    "bad/tvm-ffi": (False, "tvm-ffi kernels: kbuild does not build them yet"),
    "good/edition4": (True, "kbuild's edition 4 takes `universal` (here false), a key the parser's v4 does not "
                            "know (it was v3's)"),
    "good/edition4-universal": (True, "as good/edition4: `universal = true`, read as a [torch-noarch] kernel"),
    "good/torch-noarch": (True, "kernel-builder's documentation spells [torch-noarch]'s cuda-capabilities with a "
                                "dash, which kbuild's edition 5 takes; the parser takes only cuda_capabilities"),
    "good/tricky-lines": (True, "the parser wants [general] source to be a git URL; kbuild takes any string"),
}


@pytest.fixture(scope="module")
def hf_python() -> Path:
    """kernels 0.19.1's environment, made here when ci/setup.sh has not (it must run in CI: no skip)."""
    try:
        return hf_envs.ensure("kernels-0.19")
    except hf_envs.EnvError as e:
        pytest.fail(str(e))


def hf_parse(python: Path, folders: list[Path]) -> dict[str, str | None]:
    done = subprocess.run([str(python), "-c", PARSE, *map(str, folders)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def kbuild_reads(folder: Path) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # edition 4 notices, dropped capabilities
        try:
            load_manifest(folder)
        except ManifestError as e:
            return str(e)
    return None


def test_each_manifest_is_accepted_or_refused_by_both(hf_python, monkeypatch):
    monkeypatch.chdir(MANIFESTS)
    hf = hf_parse(hf_python, [Path(case) for case in CASES])
    wrong = []
    for case in CASES:
        ours, theirs = kbuild_reads(Path(case)), hf[case]
        if case in DIFFERENCES:
            accepts, why = DIFFERENCES[case]
            if (ours is None, theirs is None) != (accepts, not accepts):
                wrong.append(f"{case}: listed as kbuild {'accepting' if accepts else 'refusing'} what the parser "
                             f"{'refuses' if accepts else 'accepts'} ({why}), but kbuild: {ours or 'ok'}; "
                             f"parser: {theirs or 'ok'}")
        elif (ours is None) != (theirs is None):
            wrong.append(f"{case}: kbuild: {ours or 'ok'}; parser: {theirs or 'ok'}")
    assert not wrong, "\n".join(wrong)
    # the edition 6 cases are there, on both sides of the line
    assert {c for c in CASES if "edition6" in c or "edition-6" in c} >= {
        "good/edition6-compiled", "good/edition6-noarch", "bad/edition-6-backend", "bad/edition-6-noarch-dashes"}


def upgrade_sources() -> list[Path]:
    ours = [TESTS / "fixtures" / "scale-edition4", MANIFESTS / "good" / "edition5-compiled",
            MANIFESTS / "good" / "torch-noarch", *sorted((TESTS.parent / "kernels").glob("*/"))]
    return [p for p in ours if (p / "build.toml").is_file()] + sorted(p.parent for p in CORPUS.glob("*/build.toml"))


def test_edition_6_rewrites_are_read_by_the_parser(hf_python, tmp_path, capsys):
    """What `kbuild update-build` writes is edition 6 as Hugging Face reads it: kbuild's own kernels
    and every corpus kernel (edition 4 and 5), rewritten, are accepted by the parser."""
    upgraded = []
    for source in upgrade_sources():
        kernel = tmp_path / f"{source.parent.name}-{source.name}"
        shutil.copytree(source, kernel, ignore=shutil.ignore_patterns("build", ".kbuild", ".git"))
        assert main(["update-build", str(kernel)]) == 0, capsys.readouterr()
        assert "edition = 6" in (kernel / "build.toml").read_text()
        upgraded.append(kernel)
    hf = hf_parse(hf_python, upgraded)
    assert {k: e for k, e in hf.items() if e is not None} == {}
    assert len(upgraded) >= 6  # kbuild's own, without the corpus
