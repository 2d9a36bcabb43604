"""Developer and CI sessions. `nox -s tests` is what CI runs; `nox -s build` builds kernels/*."""

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests"]

TORCH = "2.14.1"


@nox.session
def tests(session: nox.Session) -> None:
    """The full test suite (builds the first-party kernels with real nvcc and ninja)."""
    session.install(f"torch=={TORCH}", "-e", ".[test]")
    session.run("pytest", *session.posargs)


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
import os
from pathlib import Path
from builder.provision import ToolchainStore
root = Path(os.environ.get("KBUILD_TOOLCHAINS") or Path.home() / ".cache/kbuild/toolchains")
print(ToolchainStore(root).torch_python("{release}", cuda=True))
"""


def _other_releases(session: nox.Session) -> list[str]:
    code = "from builder.matrix import select; print(' '.join(r.version for r in select().torch))"
    return [v for v in session.run("python", "-c", code, silent=True).split() if v != TORCH]
