"""`kbuild init NAME`: a new kernel project that builds, tests and publishes as generated.

    kbuild init scale                        # cpu + cuda, against torch's stable ABI
    kbuild init scale --backends cpu         # one backend
    kbuild init scale-triton --backends triton   # Python/Triton only ([torch-noarch])

The files come from builder/templates/init/ (string.Template: `$name`, `$python_name`, ...), so
C++ braces need no escaping. Compiled projects get a stable-ABI binding (one build per backend
for every torch >= 2.10); Triton projects a Python package. Each gets tests, a benchmark stub, a
README and a .gitignore for build/ and .kbuild/. The project is a git repository of its own
(`git init`), since builds name their sources by git tree and publishing wants them committed:
inside another repository (`kbuild init` run from a checkout) it would be committed into that
one, so that is refused unless asked for (`in_repo`, `--in-repo`: a workspace member).
"""

from __future__ import annotations

from pathlib import Path
from string import Template

from builder import resources
from builder.project.manifest import NAME_RE
from kbuild_common import proc
from kbuild_common.errors import UsageError

BACKENDS = ("cpu", "cuda", "triton")


def parse_backends(text: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(b.strip() for b in text.split(",") if b.strip()))
    unknown = [b for b in chosen if b not in BACKENDS]
    if not chosen or unknown:
        raise UsageError(f"--backends: expected a comma-separated subset of {', '.join(BACKENDS)}, got {text!r}")
    if "triton" in chosen and len(chosen) > 1:
        raise UsageError("--backends: triton kernels are Python-only ([torch-noarch]) and cannot share a project "
                         "with compiled cpu/cuda kernels; make two projects")
    return chosen


def scaffold(dest: Path, name: str, backends: tuple[str, ...], org: str = "me", in_repo: bool = False) -> list[Path]:
    """Write the project into `dest` (new or empty); returns the files written. `in_repo`: `dest`
    may lie inside another git repository (it then gets no repository of its own)."""
    if not NAME_RE.match(name):  # what build.toml's [general] name accepts
        raise UsageError(f"kbuild init: {name!r} is not a kernel name (lowercase letters, digits and '-', "
                         "starting with a letter and at least two long, e.g. fused-scale)")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"kbuild init: {dest} exists and is not an empty folder")
    outer = _repository_of(dest)
    if outer is not None and not in_repo:
        raise UsageError(f"kbuild init: {dest} would be inside the git repository {outer}, and committing the "
                         "project would commit into that one",
                         hint=f"pass --dir with a folder outside {outer} (e.g. --dir ~/{name}), or --in-repo "
                              "to make it part of that repository (a workspace member)")
    python_name = name.replace("-", "_")
    kind = "triton" if backends == ("triton",) else "compiled"
    values = {"name": name, "python_name": python_name, "repo_id": f"{org}/{name}", "kind": kind,
              "backends": ", ".join(f'"{b}"' for b in backends if b != "triton") or '"cuda"',
              "backends_text": ", ".join(backends),
              "load_note": triton_note(f"{org}/{name}") if kind == "triton" else ""}
    files: dict[str, str] = {}
    if kind == "compiled":
        values["sections"] = "".join(_render(f"compiled/section_{b}.toml.in", values) for b in backends)
        files["build.toml"] = "compiled/build.toml.in"
        files["torch-ext/torch_binding.cpp"] = "compiled/torch_binding.cpp.in"
        files["torch-ext/torch_binding.h"] = "compiled/torch_binding.h.in"
        if "cpu" in backends:
            files[f"{python_name}_cpu/scale.cpp"] = "compiled/scale.cpp.in"
            files[f"{python_name}_cpu/scale.h"] = "compiled/scale.h.in"
        if "cuda" in backends:
            files[f"{python_name}_cuda/scale.cu"] = "compiled/scale.cu.in"
            files[f"{python_name}_cuda/scale.cuh"] = "compiled/scale.cuh.in"
    else:
        files["build.toml"] = "triton/build.toml.in"
    files[f"torch-ext/{python_name}/__init__.py"] = f"{kind}/__init__.py.in"
    files[f"tests/test_{python_name}.py"] = f"{kind}/test.py.in"
    files["benchmarks/benchmark.py"] = "common/benchmark.py.in"
    files["README.md"] = "common/README.md.in"
    files[".gitignore"] = "common/gitignore.in"
    written = []
    for rel, template in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_render(template, values), encoding="utf-8")
        written.append(path)
    if outer is None:
        proc.run(["git", "init", "-q", str(dest)], what="git init")
    return written


def triton_note(repo_id: str) -> str:
    """The generated README's word on where a Triton kernel runs (the generated scale() refuses a CPU
    tensor without the interpreter in one line, instead of Triton's "0 active drivers")."""
    load = f'import torch; from kbuild import get_kernel; print(get_kernel("{repo_id}@v1").scale(torch.ones(3), 2.0))'
    return ("\n\nA Triton kernel needs a GPU (`x` a CUDA tensor). On a machine without one, set `TRITON_INTERPRET=1` "
            "before loading it, and it runs on CPU tensors under Triton's interpreter:\n\n"
            f"    TRITON_INTERPRET=1 python -c '{load}'")


def _render(template: str, values: dict[str, str]) -> str:
    return Template(resources.read_text(f"templates/init/{template}")).substitute(values)


def _repository_of(dest: Path) -> Path | None:
    """The work tree of the git repository `dest` (which may not exist yet) would be inside."""
    folder = dest
    while not folder.is_dir():
        folder = folder.parent
    done = proc.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"], check=False, what="git")
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None
