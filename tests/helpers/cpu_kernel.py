"""The minimal kernel projects the builder tests write: one compiled section (CPU C++ or CUDA) with
a binding and the Python package, or a Python-only (noarch) one. None of them includes torch, so
their graphs compile in seconds."""

from __future__ import annotations

from pathlib import Path

BUILD_TOML = """[general]
name = "{name}"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["{backend}"]
{extra}
[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.{section}]
backend = "{backend}"
src = ["{section}/{python}.{suffix}"]
depends = {depends}
{section_extra}"""
NOARCH_TOML = """[general]
name = "{name}"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]
{extra}
[torch-noarch]
"""
# kbuild's registration header: the variant's `from ._ops import ops` loads it (a loadable kernel;
# kbuild build imports every library before it stages it, so a test kernel must be one).
REGISTERED_BINDING = '#include "registration.h"\nREGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n'
BINDING = REGISTERED_BINDING


def hub_repo(repo_id: str) -> str:
    """The `extra` that gives a project a hub repo-id."""
    return f'[general.hub]\nrepo-id = "{repo_id}"\n'


def write_cpu_kernel(root: Path, name: str, source: str, extra: str = "", depends: str = "[]",
                     binding: str = BINDING, package: str = "") -> Path:
    """Write (or rewrite) the project `name` into `root`: one CPU section `<name>_cpu` compiling
    `source`; `extra` goes into [general], `package` is the Python package's __init__.py."""
    return _write_compiled(root, name, "cpu", source, extra, depends, "", binding, package)


def write_cuda_kernel(root: Path, name: str, source: str, capabilities: tuple[str, ...], extra: str = "",
                      binding: str = REGISTERED_BINDING, package: str = "") -> Path:
    """The same with one CUDA section `<name>_cuda` for `capabilities` (its only backend)."""
    listed = ", ".join(f'"{c}"' for c in capabilities)
    return _write_compiled(root, name, "cuda", source, extra, "[]", f"cuda-capabilities = [{listed}]\n", binding, package)


def write_cpu_cuda_kernel(root: Path, name: str, cpu_source: str, cuda_source: str, capabilities: tuple[str, ...],
                          package: str = "") -> Path:
    """Both: a CUDA section `<name>_cuda` for `capabilities` and a CPU section `<name>_cpu`, so a
    build in a CUDA torch makes a CPU and a CUDA variant of one package."""
    python = name.replace("-", "_")
    write_cuda_kernel(root, name, cuda_source, capabilities, package=package)
    toml = (root / "build.toml").read_text().replace('backends = ["cuda"]', 'backends = ["cpu", "cuda"]')
    section = f"{python}_cpu"
    toml += f'\n[kernel.{section}]\nbackend = "cpu"\nsrc = ["{section}/{python}.cpp"]\ndepends = []\n'
    _write(root, {"build.toml": toml, f"{section}/{python}.cpp": cpu_source})
    return root


def write_noarch_kernel(root: Path, name: str, extra: str = "", package: str = "") -> Path:
    """A Python-only project `name` (its torch-noarch variants need no compiler)."""
    python = name.replace("-", "_")
    _write(root, {"build.toml": NOARCH_TOML.format(name=name, extra=extra), f"torch-ext/{python}/__init__.py": package})
    return root


def _write_compiled(root: Path, name: str, backend: str, source: str, extra: str, depends: str,
                    section_extra: str, binding: str, package: str) -> Path:
    python = name.replace("-", "_")
    section, suffix = f"{python}_{backend}", "cu" if backend == "cuda" else "cpp"
    _write(root, {
        "build.toml": BUILD_TOML.format(name=name, python=python, backend=backend, section=section, suffix=suffix,
                                        extra=extra, depends=depends, section_extra=section_extra),
        f"{section}/{python}.{suffix}": source,
        "torch-ext/torch_binding.cpp": binding.format(python=python),
        f"torch-ext/{python}/__init__.py": package,
    })
    return root


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
