"""The kernel `build.toml` schema (kernel-builder edition 5; edition 4 upgraded in memory).

The one owner of the manifest format. Unknown keys, unknown values and missing required keys
are errors; every error is one line: `file:line: [table] key: what was expected`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kbuild.kernel_deps import KernelPin
from kbuild.variants import BACKENDS

from builder.backends.cuda_arch import Capability, parse_capability, well_formed_capability
from builder.project.dependencies import BUILT_BACKENDS, check_dependency, check_python_dependency
from builder.errors import ManifestError
from builder.notices import notice
from builder.project.toml_lines import key_lines
from builder._toml import tomllib

NAME_RE = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]\Z")
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?\Z")
EDITIONS = (4, 5)
CURRENT_EDITION = 5  # what kbuild update-build writes

# kind per key: "str", "int", "strs" (list of strings), "table", "stable-abi" (str or table),
# "kernels" (kernel dependencies: a list of {repo-id, version | revision} tables).
_GENERAL = {"name": "str", "version": "int", "edition": "int", "license": "str", "backends": "strs",
            "upstream": "str", "source": "str", "python-depends": "strs", "kernel-depends": "kernels",
            "hub": "table", "cuda": "table", "xpu": "table", "neuron": "table", "tpu": "table",
            "universal": "bool", "manylinux": "str"}
_HUB = {"repo-id": "str", "branch": "str"}
# kernel-builder's per-backend [general.<backend>] tables: their dependencies are that backend's builds' only.
_GENERAL_BY_BACKEND = {
    "cuda": {"minver": "str", "maxver": "str", "python-depends": "strs", "kernel-depends": "kernels"},
    "xpu": {"python-depends": "strs", "kernel-depends": "kernels"},
    "neuron": {"python-depends": "strs", "kernel-depends": "kernels"},
    "tpu": {"python-depends": "strs"},
}
_KERNEL_DEPENDENCY = {"repo-id": "str", "version": "int", "revision": "str"}
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*/[A-Za-z0-9][-A-Za-z0-9_.]*\Z")
_TORCH = {"src": "strs", "include": "strs", "pyext": "strs", "minver": "str", "maxver": "str",
          "cxx-flags": "strs", "stable-abi": "stable-abi"}
_NOARCH = {"pyext": "strs", "cuda-capabilities": "strs", "rocm-archs": "strs"}
_KERNEL_COMMON = {"backend": "str", "depends": "strs", "src": "strs", "include": "strs", "cxx-flags": "strs"}
_KERNEL_BY_BACKEND = {
    "cuda": {"cuda-capabilities": "strs", "cuda-flags": "strs", "cuda-minver": "str"},
    "rocm": {"rocm-archs": "strs", "hip-flags": "strs"},
    "xpu": {"sycl-flags": "strs"},
}
_TOP = ("general", "torch", "torch-noarch", "tvm-ffi", "kernel")


@dataclass(frozen=True)
class KernelSection:
    name: str
    backend: str
    depends: tuple[str, ...]
    src: tuple[str, ...]
    include: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_capabilities: tuple[Capability, ...] | None = None
    cuda_flags: tuple[str, ...] = ()
    cuda_minver: str | None = None
    rocm_archs: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class TorchSection:
    src: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    pyext: tuple[str, ...] = ("py", "pyi")
    minver: str | None = None
    maxver: str | None = None
    cxx_flags: tuple[str, ...] = ()
    stable_abi: dict[str, str] | None = None  # backend ("*" for all) -> minimum torch


@dataclass(frozen=True)
class NoarchSection:
    pyext: tuple[str, ...] = ("py", "pyi")
    cuda_capabilities: tuple[Capability, ...] | None = None
    rocm_archs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Manifest:
    path: Path
    edition: int
    name: str
    backends: tuple[str, ...]
    version: int | None = None
    license: str | None = None
    upstream: str | None = None
    source: str | None = None
    python_depends: tuple[str, ...] = ()  # [general]'s: every variant's
    kernel_depends: tuple[KernelPin, ...] = ()
    backend_python_depends: dict[str, tuple[str, ...]] = field(default_factory=dict)  # [general.<backend>]'s
    backend_kernel_depends: dict[str, tuple[KernelPin, ...]] = field(default_factory=dict)
    hub_repo_id: str | None = None
    hub_branch: str | None = None
    cuda_minver: str | None = None
    cuda_maxver: str | None = None
    torch: TorchSection | None = None
    noarch: NoarchSection | None = None
    kernels: tuple[KernelSection, ...] = ()
    manylinux: str | None = None  # kbuild's [general] manylinux: the ABI floor a build must not exceed
    kernel_builder: bool = False  # a kernel-builder project (its flake.nix builds it with kernel-builder)
    lines: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")

    def kernels_for(self, backend: str) -> tuple[KernelSection, ...]:
        return tuple(k for k in self.kernels if k.backend == backend)

    def python_depends_for(self, backend: str) -> tuple[str, ...]:
        """What a `backend` variant's metadata.json lists: [general]'s, then [general.<backend>]'s."""
        return self.python_depends + self.backend_python_depends.get(backend, ())

    def kernel_depends_for(self, backend: str) -> tuple[KernelPin, ...]:
        return self.kernel_depends + self.backend_kernel_depends.get(backend, ())

    def where(self, *keys: str) -> str:
        """`file:line: [table] key` for an error about `keys` (best line known)."""
        return _Where(self.path, self.lines).at(keys)


class _Where:
    def __init__(self, path: Path, lines: dict):
        self.path, self.lines = path, lines

    def at(self, keys: tuple[str, ...]) -> str:
        line = self.line(keys)
        table, key = _split_table(keys)
        loc = f"{_display(self.path)}:{line}" if line else _display(self.path)
        return f"{loc}: [{table}] {key}".rstrip() if table else f"{loc}: {key}"

    def line(self, keys: tuple[str, ...]) -> int | None:
        """The line of `keys`, else of the nearest enclosing table or key that is written."""
        for n in range(len(keys), 0, -1):
            if (line := self.lines.get(tuple(keys[:n]))) is not None:
                return line
        return None

    def error(self, keys: tuple[str, ...], message: str) -> ManifestError:
        return ManifestError(f"{self.at(keys)}: {message}", line=self.line(keys))


def _split_table(keys: tuple[str, ...]) -> tuple[str, str]:
    if not keys:
        return "", ""
    if keys[0] == "kernel" and len(keys) >= 2:
        return f"kernel.{keys[1]}", ".".join(keys[2:])
    if keys[0] == "general" and len(keys) >= 2 and keys[1] in ("hub", *_GENERAL_BY_BACKEND):
        return f"general.{keys[1]}", ".".join(keys[2:])
    return keys[0], ".".join(keys[1:])


def _display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_manifest(path: Path) -> Manifest:
    """Read and validate a kernel's build.toml (a folder or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "build.toml"
    if not path.is_file():
        raise ManifestError(f"{_display(path)}: no build.toml here", hint="run kbuild in a kernel project folder")
    return parse_manifest(path, path.read_text(encoding="utf-8", errors="replace"))


def parse_manifest(path: Path, text: str, notify: bool = True) -> Manifest:
    """Validate `text` as the build.toml at `path` (errors name that file); `notify=False` keeps the
    edition 4 notice back (kbuild update-build reads old manifests on purpose)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"line (\d+)", str(e))
        loc = f"{_display(path)}:{line.group(1)}" if line else _display(path)
        reason = re.sub(r" \(at line.*", "", str(e))
        raise ManifestError(f"{loc}: invalid TOML: {reason}") from None
    return _Parser(path, data, key_lines(text), is_kernel_builder_project(path.parent), notify).manifest()


def check_python_package(m: Manifest) -> None:
    """The kernel's Python package (torch-ext/<name>/__init__.py) must exist: every variant ships
    it, and without it a variant builds, publishes and only fails when loaded."""
    package = m.root / "torch-ext" / m.python_name
    if not (package / "__init__.py").is_file():
        what = "has no __init__.py" if package.is_dir() else "is missing"
        raise ManifestError(f"{_display(package)}/: the kernel's Python package {what} (every variant ships "
                            f"torch-ext/{m.python_name}/, named after [general] name = \"{m.name}\")",
                            hint=f"create torch-ext/{m.python_name}/__init__.py that imports the kernel's ops")


def _policy_error(policy: str) -> str | None:
    from builder.project.manylinux import policy_error  # auditwheel's policies, only for a [general] manylinux

    return policy_error(policy)


def is_kernel_builder_project(folder: Path) -> bool:
    """A project kernel-builder builds: its flake.nix takes kernel-builder (or its successor, the
    huggingface/kernels flake) as an input. Such projects get kernel-builder's leniency where
    kbuild is stricter (a capability no GPU has is dropped with a warning, not refused)."""
    try:
        flake = (folder / "flake.nix").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"kernel-builder|huggingface/kernels|genKernelFlakeOutputs", flake))


class _Parser:
    """Validates the whole file and reports every error it finds (`kbuild check` lists them all):
    a bad value is left out and checking goes on; what depends on it is not checked, so one
    mistake gives one line."""

    def __init__(self, path: Path, data: dict, lines: dict, kernel_builder: bool = False, notify: bool = True):
        self.path, self.data, self.lines = path, data, lines
        self.kernel_builder, self.notify = kernel_builder, notify
        self.w = _Where(path, lines)
        self.errors: list[ManifestError] = []

    def manifest(self) -> Manifest:
        if "workspace" in self.data:
            raise self.w.error(("workspace",), "this is a workspace manifest, not a kernel's build.toml")
        m = self._manifest()
        if self.errors:  # in file order; those without a line (a missing table) last
            raise ManifestError.of(sorted(self.errors, key=lambda e: (e.line is None, e.line or 0)))
        return m

    def _manifest(self) -> Manifest | None:
        self._no_unknown((), self.data, _TOP)
        if "tvm-ffi" in self.data:
            self._fail(("tvm-ffi",), "tvm-ffi kernels are not supported by kbuild yet (use [torch] or [torch-noarch])")
        general = self._table(("general",), self.data.get("general"), _GENERAL, required=True)
        edition = self._check(self._edition, general, default=5) if general is not None else 5
        if general is not None:
            for key in ("name", "backends") + (("version", "license") if edition == 4 else ()):
                self._require(("general",), self.data["general"], key)
        name = (general or {}).get("name")
        if name is not None and not NAME_RE.match(name):
            self._fail(("general", "name"), f'"{name}" is not a valid kernel name (lowercase letters, digits '
                       "and -, starting with a letter and ending with a letter or digit, as kernel-builder "
                       "requires)")
        # None when [general] backends is missing or bad (already reported): kernels are not matched against it
        backends = self._check(self._backends, general["backends"]) if general and "backends" in general else None
        torch, noarch = self._check(self._framework, edition, general or {}, default=(None, None))
        general = general or {}
        hub = self._table(("general", "hub"), general.get("hub"), _HUB) or {}
        by_backend = {b: self._table(("general", b), general.get(b), spec) or {}
                      for b, spec in _GENERAL_BY_BACKEND.items()}
        cuda = by_backend["cuda"]
        for key in ("minver", "maxver"):
            if key in cuda:
                self._check(self._version, ("general", "cuda", key), cuda[key])
        if "manylinux" in general and (problem := _policy_error(general["manylinux"])):
            self._fail(("general", "manylinux"), problem)
        kernels = self._kernels(backends)
        if noarch is not None and kernels:
            self._fail(("kernel", kernels[0].name), "[torch-noarch] kernels have no compiled [kernel.*] sections")
        python_depends = self._check(self._python_depends, ("general",), general, None, default=())
        kernel_depends = self._check(self._kernel_depends, ("general",), general, default=())
        backend_python_depends = {b: self._check(self._python_depends, ("general", b), t, b, default=())
                                  for b, t in by_backend.items() if "python-depends" in t}
        backend_kernel_depends = {b: self._check(self._kernel_depends, ("general", b), t, default=())
                                  for b, t in by_backend.items() if "kernel-depends" in t}
        if self.errors:
            return None
        return Manifest(
            path=self.path, edition=5, name=name, backends=backends, version=general.get("version"),
            license=general.get("license"), upstream=general.get("upstream"), source=general.get("source"),
            python_depends=python_depends, kernel_depends=kernel_depends,
            backend_python_depends=backend_python_depends, backend_kernel_depends=backend_kernel_depends,
            hub_repo_id=hub.get("repo-id"), hub_branch=hub.get("branch"),
            cuda_minver=cuda.get("minver"), cuda_maxver=cuda.get("maxver"),
            torch=torch, noarch=noarch, kernels=kernels, kernel_builder=self.kernel_builder, lines=self.lines,
            manylinux=general.get("manylinux"),
        )

    # -- collecting errors --------------------------------------------------------------------

    def _fail(self, keys, message: str) -> None:
        self.errors.append(self.w.error(keys, message))

    def _check(self, check, *args, default=None):
        """check(*args), or `default` once its error is recorded (a check stops at its first error:
        a value is wrong once)."""
        try:
            return check(*args)
        except ManifestError as e:
            self.errors.append(e)
            return default

    # -- sections -----------------------------------------------------------------------------

    def _edition(self, general: dict) -> int:
        if "edition" not in general:
            if isinstance(self.data.get("general"), dict) and "edition" in self.data["general"]:
                return 5  # written, but not as an integer: reported by _table
            version = general.get("version")
            read = f" (its `version = {version}` is the kernel's major version, not the format's)" \
                if isinstance(version, int) and not isinstance(version, bool) else ""
            if self.notify:
                notice(f"{_display(self.path)}: edition 4 manifest (no [general] edition){read}, upgraded to "
                       "edition 5 in memory; run `kbuild update-build` to rewrite it as edition 5")
            return 4
        if general["edition"] not in EDITIONS:
            raise self.w.error(("general", "edition"), f"unsupported edition {general['edition']} (supported: 4, 5)")
        if general.get("universal") is not None:
            raise self.w.error(("general", "universal"), "edition 5 has no `universal`; use a [torch-noarch] table")
        return general["edition"]

    def _backends(self, values: list[str]) -> tuple[str, ...]:
        if not values:
            raise self.w.error(("general", "backends"), f"expected at least one of {', '.join(BACKENDS)}")
        for b in values:
            if b not in BACKENDS:
                raise self.w.error(("general", "backends"), f'unknown backend "{b}" (known: {", ".join(BACKENDS)})')
        return tuple(dict.fromkeys(values))

    def _framework(self, edition: int, general: dict) -> tuple[TorchSection | None, NoarchSection | None]:
        has_torch, has_noarch = "torch" in self.data, "torch-noarch" in self.data
        if edition == 4 and general.get("universal"):
            has_noarch = True  # edition 4 spelled a Python-only kernel as `universal = true`
        if has_torch and has_noarch:
            raise self.w.error(("torch-noarch",), "a kernel has exactly one of [torch] and [torch-noarch]")
        if not (has_torch or has_noarch):
            if general.get("universal") or "tvm-ffi" in self.data:
                return None, None  # edition 4's `universal` in edition 5, or tvm-ffi: said already
            raise self.w.error(("general",), "missing framework table: add [torch] (compiled) or [torch-noarch] (Python/Triton)")
        if has_noarch:
            t = self._table(("torch-noarch",), self.data.get("torch-noarch", {}), _NOARCH)
            if t is None:
                return None, None
            caps = self._check(self._capabilities, ("torch-noarch", "cuda-capabilities"), t.get("cuda-capabilities"))
            return None, NoarchSection(tuple(t.get("pyext", ("py", "pyi"))), caps, tuple(t.get("rocm-archs", ())))
        t = self._table(("torch",), self.data["torch"], _TORCH)
        if t is None:
            return None, None
        for key in ("minver", "maxver"):
            if key in t:
                self._check(self._version, ("torch", key), t[key])
        src = self._check(self._paths, ("torch", "src"), t.get("src", []))  # None: reported
        if src == () and self.data.get("kernel"):
            self._fail(("torch", "src"), "missing: [torch] needs the binding sources (e.g. torch-ext/torch_binding.cpp)")
        return TorchSection(
            src=src or (),
            include=tuple(t.get("include", ())),
            pyext=tuple(t.get("pyext", ("py", "pyi"))), minver=t.get("minver"), maxver=t.get("maxver"),
            cxx_flags=tuple(t.get("cxx-flags", ())), stable_abi=self._check(self._stable_abi, t.get("stable-abi")),
        ), None

    def _stable_abi(self, value) -> dict[str, str] | None:
        if value is None:
            return None
        table = {"*": value} if isinstance(value, str) else value
        for backend, version in table.items():
            keys = ("torch", "stable-abi") if backend == "*" else ("torch", "stable-abi", backend)
            if backend != "*" and backend not in BACKENDS:
                raise self.w.error(keys, f'unknown backend "{backend}" (known: {", ".join(BACKENDS)})')
            if not isinstance(version, str):
                raise self.w.error(keys, f"expected a torch version string like \"2.10\", got {version!r}")
            self._version(keys, version)
        return dict(table)

    def _kernels(self, backends: tuple[str, ...] | None) -> tuple[KernelSection, ...]:
        kernels = self.data.get("kernel", {})
        if not isinstance(kernels, dict):
            self._fail(("kernel",), "expected tables [kernel.<name>]")
            return ()
        found = (self._check(self._kernel, name, body, backends) for name, body in kernels.items())
        return tuple(k for k in found if k is not None)

    def _kernel(self, name: str, body, backends: tuple[str, ...] | None) -> KernelSection | None:
        keys = ("kernel", name)
        if not isinstance(body, dict):
            raise self.w.error(keys, "expected a table")
        backend = body.get("backend")
        if backend is None:
            raise self.w.error(keys + ("backend",), f"missing required key (one of {', '.join(BACKENDS)})")
        self._type(keys + ("backend",), backend, "str")
        if backend not in BACKENDS:
            raise self.w.error(keys + ("backend",), f'unknown backend "{backend}" (known: {", ".join(BACKENDS)})')
        if backends is not None and backend not in backends:
            raise self.w.error(keys + ("backend",), f'"{backend}" is not in [general] backends ({", ".join(backends)})')
        spec = {**_KERNEL_COMMON, **_KERNEL_BY_BACKEND.get(backend, {})}
        t = self._table(keys, body, spec, backend_note=backend)
        for key in ("depends", "src"):
            self._require(keys, body, key)
        # Sections of backends kbuild never compiles keep their dependencies unchecked: their
        # names (sycl_tla, metal-cpp, ...) never reach a build here.
        if backend in BUILT_BACKENDS:
            for dep in t.get("depends", ()):
                if problem := check_dependency(dep, backend):
                    self._fail(keys + ("depends",), problem)
        if "cuda-minver" in t:
            self._check(self._version, keys + ("cuda-minver",), t["cuda-minver"])
        return KernelSection(
            name=name, backend=backend, depends=tuple(t.get("depends", ())),
            src=self._check(self._paths, keys + ("src",), t.get("src", []), default=()),
            include=tuple(t.get("include", ())), cxx_flags=tuple(t.get("cxx-flags", ())),
            cuda_capabilities=self._check(self._capabilities, keys + ("cuda-capabilities",), t.get("cuda-capabilities")),
            cuda_flags=tuple(t.get("cuda-flags", ())), cuda_minver=t.get("cuda-minver"),
            rocm_archs=tuple(t.get("rocm-archs", ())), hip_flags=tuple(t.get("hip-flags", ())),
            sycl_flags=tuple(t.get("sycl-flags", ())),
        )

    def _python_depends(self, keys, table: dict, backend: str | None) -> tuple[str, ...]:
        names = table.get("python-depends", [])
        for name in names:
            if problem := check_python_dependency(name, backend):
                raise self.w.error(keys + ("python-depends",), problem)
        return tuple(names)

    def _kernel_depends(self, keys, table: dict) -> tuple[KernelPin, ...]:
        keys = keys + ("kernel-depends",)
        found = []
        for entry in table.get("kernel-depends", []):
            pin = self._table(keys, entry, _KERNEL_DEPENDENCY)
            if pin is None:
                continue
            self._require(keys, entry, "repo-id")
            entry, repo_id = pin, pin.get("repo-id")
            if repo_id is None:
                continue
            if not REPO_ID_RE.match(repo_id):
                raise self.w.error(keys, f'"{repo_id}" is not a Hub repo id (expected "org/name")')
            if ("version" in entry) == ("revision" in entry):
                raise self.w.error(keys, f'{repo_id}: give exactly one of `version` (a major version, e.g. 1) '
                                   "or `revision` (a branch, tag or commit)")
            found.append(KernelPin(repo_id, entry.get("version"), entry.get("revision")))
        return tuple(found)

    # -- value checks -------------------------------------------------------------------------

    def _table(self, keys, value, spec: dict, required: bool = False, backend_note: str | None = None) -> dict | None:
        """The keys of `value` that are known and well-typed (each other key is an error, recorded);
        None when `value` is absent (an error if required) or not a table."""
        if value is None:
            if required:
                self._fail(keys, "missing required table")
                return None
            return {}
        if not isinstance(value, dict):
            self._fail(keys, "expected a table")
            return None
        allowed = tuple(spec)
        good = {}
        for key, v in value.items():
            if key not in spec:
                other = [b for b, s in _KERNEL_BY_BACKEND.items() if key in s]
                if backend_note and other:
                    self._fail(keys + (key,), f'only valid for backend {other[0]}, this kernel is "{backend_note}"')
                else:
                    self._fail(keys + (key,), f"unknown key (expected one of: {', '.join(allowed)})")
            elif self._check(self._type, keys + (key,), v, spec[key], default=False) is not False:
                good[key] = v
        return good

    def _no_unknown(self, keys, table: dict, allowed) -> None:
        for key in table:
            if key not in allowed:
                self._fail(keys + (key,), f"unknown table (expected one of: {', '.join(allowed)})")

    def _require(self, keys, table: dict, key: str) -> None:
        if key not in table:
            self._fail(keys + (key,), "missing required key")

    def _type(self, keys, value, kind: str) -> bool:
        ok = {
            "str": isinstance(value, str),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "bool": isinstance(value, bool),
            "strs": isinstance(value, list) and all(isinstance(v, str) for v in value),
            "table": isinstance(value, dict),
            "kernels": isinstance(value, list) and all(isinstance(v, dict) for v in value),
            "stable-abi": isinstance(value, (str, dict)),
        }[kind]
        if not ok:
            expected = {"str": "a string", "int": "an integer", "bool": "true or false",
                        "strs": "a list of strings", "table": "a table",
                        "kernels": 'a list of tables like {repo-id = "org/name", version = 1}',
                        "stable-abi": 'a torch version ("2.10") or a table backend -> version'}[kind]
            raise self.w.error(keys, f"expected {expected}, got {value!r}")
        return True

    def _version(self, keys, value: str) -> None:
        if not VERSION_RE.match(value):
            raise self.w.error(keys, f'expected a version like "2.10" or "12.8", got "{value}"')

    def _capabilities(self, keys, values) -> tuple[Capability, ...] | None:
        if values is None:
            return None
        if not values:
            raise self.w.error(keys, "empty list: name at least one capability or leave the key out for the defaults")
        caps = []
        for v in values:
            try:
                caps.append(parse_capability(v))
            except ValueError as e:
                if not (self.kernel_builder and well_formed_capability(v)):
                    raise self.w.error(keys, str(e)) from None
                # kernel-builder drops capabilities no nvcc knows; its projects must still build
                notice(f'{self.w.at(keys)}: unknown capability "{v}" dropped, as kernel-builder '
                       "does (a kbuild project gets an error)")
        if not caps:
            raise self.w.error(keys, "no known capability left: name at least one (or leave the key out for the defaults)")
        return tuple(dict.fromkeys(caps))

    def _paths(self, keys, values: list[str]) -> tuple[str, ...]:
        for v in values:
            p = Path(v)
            if p.is_absolute() or ".." in p.parts:
                raise self.w.error(keys, f'"{v}" must be a path inside the kernel folder')
        missing = [v for v in values if not (self.path.parent / v).is_file()]
        if missing:  # all of them at once: a half-copied project should not take one run per file
            listed = ", ".join(f'"{v}"' for v in missing)
            raise self.w.error(keys, f"file not found: {listed}" if len(missing) == 1 else
                               f"{len(missing)} files not found: {listed}")
        return tuple(values)
