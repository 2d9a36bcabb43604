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
@nox.parametrize("torch", ["2.13.0", "2.14.1"])
def matrix(session: nox.Session, torch: str) -> None:
    """Build and test kernels/* against one torch release per session."""
    session.install(f"torch=={torch}", "-e", ".[build]", "pytest", "numpy")
    session.run("kbuild", "build", ".")
    session.run("kbuild", "test", ".")
