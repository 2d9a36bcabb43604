"""A minimal one-section CPU kernel project for builder tests: build.toml, a binding that is a bare
Python extension module, one C++ source of the test's choosing and the Python package."""

from __future__ import annotations

from pathlib import Path

BUILD_TOML = """[general]
name = "{name}"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]
{extra}
[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.{name}_cpu]
backend = "cpu"
src = ["{name}_cpu/{name}.cpp"]
depends = {depends}
"""
BINDING = ('#include <Python.h>\nstatic struct PyModuleDef m = {{PyModuleDef_HEAD_INIT, "_{name}", 0, -1, 0}};\n'
           'PyMODINIT_FUNC PyInit__{name}(void) {{ return PyModule_Create(&m); }}\n')


def write_cpu_kernel(root: Path, name: str, source: str, extra: str = "", depends: str = "[]") -> Path:
    """Write (or rewrite) the project `name` into `root`; `extra` goes into [general]."""
    files = {
        "build.toml": BUILD_TOML.format(name=name, extra=extra, depends=depends),
        f"{name}_cpu/{name}.cpp": source,
        "torch-ext/torch_binding.cpp": BINDING.format(name=name),
        f"torch-ext/{name}/__init__.py": "",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root
