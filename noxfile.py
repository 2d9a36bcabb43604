"""Developer and CI sessions. `nox -s tests` is what CI runs; `nox -s build` builds kernels/*;
`nox -s wheel` checks kbuild as users install it (CI runs it too); `nox -s lint` runs ruff and mypy
(CI runs them first); `nox -s canary` tries the newest torch, kernels and transformers the index has,
before each release."""

import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]

TORCH = "2.14.1"
ROOT = Path(__file__).resolve().parent
# the loader's tests, plus the ABI floor (builder and loader); run against the installed wheel
RUNTIME_TESTS = ("unit/test_runtime_local.py", "integration/test_runtime_local_no_torch.py",
                 "integration/test_runtime_hub.py", "unit/test_runtime_hub_addresses.py", "unit/test_runtime_refs.py",
                 "integration/test_runtime_lock.py", "integration/test_runtime_layers.py", "unit/test_variants.py",
                 "integration/test_abi_floor.py", "unit/test_abi_floor_policy.py")
# run outside the checkout: both packages and their data files must come from the wheel
_FROM_THE_WHEEL = """
import builder, kbuild, kbuild_hub, kbuild_common
from builder import resources
from builder.plan.matrix import select
for package in (builder, kbuild, kbuild_hub, kbuild_common):
    assert "site-packages" in package.__file__, f"{package.__name__} imported from {package.__file__}"
for name in ("versions.toml", "templates/registration.h", "templates/_ops.py.in", "templates/CARD.md.in",
             "templates/init/compiled/torch_binding.cpp.in"):
    assert resources.read_text(name), name
print("wheel install ok:", builder.__file__, "torch releases", [r.version for r in select().torch])
"""


@nox.session
def tests(session: nox.Session) -> None:
    """The full test suite (builds the first-party kernels with real nvcc and ninja)."""
    session.install(f"torch=={TORCH}", "-e", ".[test]")
    session.run("pytest", *session.posargs)


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """ruff, then mypy (their settings: pyproject.toml), in this environment: the test extra pins both, and mypy
    reads torch's types from the torch installed beside kbuild (a fresh venv would download it for minutes)."""
    session.run(sys.executable, "-m", "ruff", "check", *session.posargs, external=True)
    session.run(sys.executable, "-m", "mypy", external=True)


@nox.session
def build(session: nox.Session) -> None:
    """Build every first-party kernel for this environment's torch, then run their tests."""
    session.install(f"torch=={TORCH}", "-e", ".[build]", "pytest", "numpy")
    session.run("kbuild", "build", ".", *session.posargs)
    session.run("kbuild", "test", ".")


@nox.session
def matrix(session: nox.Session) -> None:
    """The full torch x CUDA matrix (builder/versions.toml) in one ninja graph, provisioning each
    toolchain once under $KBUILD_TOOLCHAINS; then every variant's tests in its own torch."""
    session.install(f"torch=={TORCH}", "-e", ".[build]", "pytest", "numpy")
    session.run("kbuild", "build", ".", "--all", *session.posargs)
    session.run("kbuild", "test", ".")  # this environment's torch; other releases' variants skip
    for release in _other_releases(session):
        python = session.run("python", "-c", _TOOLCHAIN_PYTHON.format(release=release), silent=True).strip()
        session.run(python, "-m", "pip", "install", "-q", "pytest", "numpy", external=True)
        session.run("kbuild", "test", ".", "--python", python)


_TOOLCHAIN_PYTHON = """
from builder.toolchains.provision import ToolchainStore
from builder.config.environment import from_environment
print(ToolchainStore(from_environment().toolchains_dir).torch_python("{release}", "cuda"))
"""


def _other_releases(session: nox.Session) -> list[str]:
    code = "from builder.plan.matrix import select; print(' '.join(r.version for r in select().torch))"
    return [v for v in session.run("python", "-c", code, silent=True).split() if v != TORCH]


# Hugging Face's loader and transformers against kbuild's variants and hub (tests/helpers/hf_envs.py's
# environments), and the newest torch built for, published and loaded (tests/integration/test_newest_torch.py)
HF_TESTS = ("integration/test_hf_loader_formats.py", "integration/test_hf_transformers.py",
            "integration/test_hf_manifest_parity.py", "integration/test_variant_choice_parity.py",
            "integration/test_layer_api_parity.py", "integration/test_layer_api_transformers.py")
_NEWEST = """
from importlib.metadata import version
print(" ".join(f"{name}=={version(name)}" for name in ("torch", "kernels", "transformers")))
"""
_IN_THE_TABLE = """
import sys
from builder.plan.matrix import full_matrix
release = sys.argv[1].split("+")[0]
series = tuple(int(p) for p in release.split(".")[:2])
if series not in {r.series for r in full_matrix().torch}:
    sys.exit(f"builder/versions.toml lacks torch {release}: add its row (kbuild toolchain check-index prints it)")
"""


@nox.session
def canary(session: nox.Session) -> None:
    """The next releases before users meet them: the newest torch, kernels and transformers the index
    has, pins ignored, in an environment of their own (this machine's pip constraints too: an empty
    constraints file for that environment alone). Fails in one line when builder/versions.toml lacks
    that torch; then the Hugging Face compatibility tests with the newest kernels and transformers
    (hf_envs' `kernels-newest`, beside the pinned pairs), and kernels/activation and kernels/rmsnorm
    built, published and loaded (kbuild's loader and kernels') with the newest torch. The tests
    themselves run as `tests` runs them, on its torch (TORCH). Several GB (torch 2.15.0: 2.6 GB
    downloaded, 5.5 GB installed): run before each release, not in every CI run (README)."""
    session.install(f"torch=={TORCH}", "-e", ".[build,sigstore]", "pytest", "numpy", "einops", "filelock")
    tmp = Path(session.create_tmp()).resolve()
    empty = tmp / "no-constraints.txt"
    empty.write_text("")
    newest = tmp / "newest"
    python = str(newest / "bin" / "python")
    if not Path(python).is_file():
        session.run("python", "-m", "venv", str(newest))
    session.run(python, "-m", "pip", "install", "-q", "--upgrade", "torch", "kernels", "transformers", "numpy",
                external=True, env={"PIP_CONSTRAINT": str(empty)})
    found = session.run(python, "-c", _NEWEST, silent=True, external=True).split()
    session.log(f"newest: {' '.join(found)}")
    session.run("python", "-c", _IN_THE_TABLE, found[0].removeprefix("torch=="))
    tests = [f"tests/{t}" for t in (*HF_TESTS, "integration/test_newest_torch.py")]
    session.run("pytest", "-p", "no:cacheprovider", "-x", *tests, *session.posargs,
                env={"KBUILD_NEWEST_TORCH_PYTHON": python, "KBUILD_HF_NEWEST": " ".join(found[1:])})


@nox.session
def wheel(session: nox.Session) -> None:
    """kbuild as users install it: the wheel `python -m build` makes, installed non-editable into
    this fresh venv; its data files read from the install, the runtime tests run against it, and
    kernels/activation built and tested with it. Then, when a Python 3.10 is found
    ($KBUILD_PYTHON310, python3.10 on PATH or under pyenv), the same wheel in a 3.10 venv (no torch
    there: `import kbuild`, and `kbuild check`, which reads TOML through tomli)."""
    tmp = Path(session.create_tmp()).resolve()
    dist = tmp / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.install("build")
    session.run("python", "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT))
    (wheel_file,) = dist.glob("kbuild-*.whl")
    _use_this_torch(session, tmp / "torch-links")
    session.install(f"torch=={TORCH}", f"{wheel_file}[test]")
    work = tmp / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(ROOT / "kernels" / "activation", work / "activation",
                    ignore=shutil.ignore_patterns("build", ".kbuild"))
    with session.chdir(tmp):
        session.run("python", "-c", _FROM_THE_WHEEL)
        session.run("pytest", "-p", "no:cacheprovider", f"--rootdir={ROOT}",
                    *(str(ROOT / "tests" / t) for t in RUNTIME_TESTS))
        session.run("kbuild", "build", str(work / "activation"))
        session.run("kbuild", "test", str(work / "activation"))
    python310 = _python310()
    if python310 is None:
        session.warn("no Python 3.10 found (set KBUILD_PYTHON310): the 3.10 check did not run")
        return
    venv = tmp / "py310"
    shutil.rmtree(venv, ignore_errors=True)
    session.run(python310, "-m", "venv", str(venv), external=True)
    session.run(str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel_file}[build]", external=True)
    with session.chdir(tmp):
        session.run(str(venv / "bin" / "python"), "-c",
                    "import sys, kbuild, builder.project.manifest; print(sys.version)", external=True)
        session.run(str(venv / "bin" / "kbuild"), "check", str(work / "activation"), external=True)


def _use_this_torch(session: nox.Session, links: Path) -> None:
    """The session's venv sees the torch of the Python nox runs in (.venv's, with its CUDA libraries)
    through a folder of links to it and a .pth file, where pip counts it as installed: CI's disk,
    shared with other jobs, need not hold a second 5.4 GB copy. kbuild's wheel and its other
    requirements still install as users get them. Without torch TORCH there, the venv installs its own."""
    try:
        ours = importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        ours = None
    if ours != TORCH:
        session.log(f"nox runs without torch {TORCH} (it has {ours}): the venv installs its own")
        return
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))  # hf_envs.torch_overlay: the links, checked
    import hf_envs  # noqa: PLC0415 - found only once the line above puts tests/helpers on the path

    (site,) = Path(session.virtualenv.location).glob("lib/python*/site-packages")
    shutil.rmtree(links, ignore_errors=True)
    hf_envs.torch_overlay(site, links, "nox's wheel venv")
    (site / "kbuild-torch-links.pth").write_text(f"{links}\n")


def _python310() -> str | None:
    for candidate in (os.environ.get("KBUILD_PYTHON310"), shutil.which("python3.10"),
                      *sorted(Path.home().glob(".pyenv/versions/3.10*/bin/python3.10"))):
        # a pyenv shim is on PATH even when it has no 3.10 to run: ask the interpreter itself
        if candidate and subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"],
                                        capture_output=True).returncode == 0:
            return str(candidate)
    return None
