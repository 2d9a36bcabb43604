"""What every edition's reader shares: the checks of a build.toml's values, and the walk that
fills the one model (builder/project/model.py). An edition's reader (v4.py, v5.py, v6.py) says
only where its spelling differs: its keys, how a kernel section names what it is, and what it
refuses.

A reader validates the whole file and reports every error it finds (`kbuild check` lists them
all): a bad value is left out and checking goes on; what depends on it is not checked, so one
mistake gives one line. Every error is `file:line: [table] key: what was expected`.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from builder.backends.cuda_arch import Capability, parse_capability, well_formed_capability
from builder.project.dependencies import BUILT_BACKENDS, check_dependency, check_python_dependency
from builder.project.model import LAYER_MAP, KernelSection, Manifest, NoarchSection, TorchSection, Where
from kbuild.kernel_deps import KernelPin
from kbuild.variants import BACKENDS
from kbuild_common.errors import ManifestError
from kbuild_common.notices import notice

NAME_RE = re.compile(r"^[a-z][-a-z0-9]*[a-z0-9]\Z")
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?\Z")
REPO_ID_RE = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]*/[A-Za-z0-9][-A-Za-z0-9_.]*\Z")

# kind per key: "str", "int", "strs" (list of strings), "table", "stable-abi" (str or table),
# "kernels" (kernel dependencies: a list of {repo-id, version | revision} tables).
GENERAL = {"name": "str", "version": "int", "edition": "int", "license": "str", "backends": "strs",
           "upstream": "str", "source": "str", "python-depends": "strs", "kernel-depends": "kernels",
           "hub": "table", "cuda": "table", "xpu": "table", "neuron": "table", "tpu": "table",
           "manylinux": "str", "check-layers": "table"}
HUB = {"repo-id": "str", "branch": "str"}
CHECK_LAYERS = {"map": "strs", "model": "str"}  # kbuild's: what `kbuild check-layers` and `kbuild test` check
# kernel-builder's per-backend [general.<backend>] tables: their dependencies are that backend's builds' only.
GENERAL_BY_BACKEND = {
    "cuda": {"minver": "str", "maxver": "str", "python-depends": "strs", "kernel-depends": "kernels"},
    "xpu": {"python-depends": "strs", "kernel-depends": "kernels"},
    "neuron": {"python-depends": "strs", "kernel-depends": "kernels"},
    "tpu": {"python-depends": "strs"},
}
KERNEL_DEPENDENCY = {"repo-id": "str", "version": "int", "revision": "str"}
TORCH = {"src": "strs", "include": "strs", "pyext": "strs", "minver": "str", "maxver": "str",
         "cxx-flags": "strs", "stable-abi": "stable-abi"}
KERNEL_COMMON = {"depends": "strs", "src": "strs", "include": "strs", "cxx-flags": "strs"}
KERNEL_BY_BACKEND = {
    "cuda": {"cuda-capabilities": "strs", "cuda-flags": "strs", "cuda-minver": "str"},
    "rocm": {"rocm-archs": "strs", "hip-flags": "strs"},
    "xpu": {"sycl-flags": "strs"},
}


def suggestion(key: str, known) -> str:
    """`; did you mean X?` for a misspelt key or table (one close known name), else ""."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.7)
    return f"; did you mean {close[0]}?" if close else ""


class Reader:
    """Edition 5's reading; the other editions override what they spell differently."""

    EDITION = 5  # what Manifest.edition says for a file this reader read
    GENERAL = GENERAL
    REQUIRED: tuple[str, ...] = ("name", "backends")  # [general]'s required keys
    RETIRED: dict[tuple[str, ...], str] = {}  # keys another edition had: (table..., key) -> what to write instead
    RETIRED_KERNEL_KEYS: dict[str, str] = {}  # the same for a key of any [kernel.<name>]
    TOP: tuple[str, ...] = ("general", "torch", "torch-noarch", "tvm-ffi", "kernel")
    # kernel-builder's documentation spells [torch-noarch]'s keys with dashes, its parser (kernels-data,
    # edition 5 and 6 alike) with underscores: edition 5 takes both, edition 6 the parser's
    NOARCH_CAPABILITIES: tuple[str, ...] = ("cuda-capabilities", "cuda_capabilities")
    NOARCH_ROCM: tuple[str, ...] = ("rocm-archs", "rocm_archs")
    NOARCH = {"pyext": "strs", **{key: "strs" for key in NOARCH_CAPABILITIES + NOARCH_ROCM}}
    SELECTOR = "backend"  # the key of a [kernel.<name>] that says what it is

    def __init__(self, path: Path, data: dict, lines: dict, kernel_builder: bool = False, notify: bool = True):
        self.path, self.data, self.lines = path, data, lines
        self.kernel_builder, self.notify = kernel_builder, notify
        self.w = Where(path, lines)
        self.errors: list[ManifestError] = []

    def manifest(self) -> Manifest:
        m = self._manifest()
        if self.errors:  # in file order; those without a line (a missing table) last
            raise ManifestError.of(sorted(self.errors, key=lambda e: (e.line is None, e.line or 0)))
        assert m is not None  # _manifest returns None only with its errors recorded
        return m

    # -- what an edition spells its own way ------------------------------------------------------

    def kernel_backend(self, keys: tuple[str, ...], value) -> str:
        """The backend a kernel section's SELECTOR value names (raises its error)."""
        self._type(keys, value, "str")
        if value not in BACKENDS:
            raise self.w.error(keys, f'unknown backend "{value}" (known: {", ".join(BACKENDS)})')
        return value

    def kind(self, backend: str) -> str:
        """How an error names a kernel section of `backend`: `backend cuda`."""
        return f"backend {backend}"

    def framework_refusals(self) -> bool:
        """Report the framework tables this edition knows and kbuild does not build; True when one was."""
        if "tvm-ffi" in self.data:
            self._fail(("tvm-ffi",), "tvm-ffi kernels are not supported by kbuild yet (use [torch] or [torch-noarch])")
            return True
        return False

    def universal(self, general: dict) -> bool:
        return False  # only edition 4 spells a Python-only kernel `universal = true`

    def noticed(self, general: dict) -> None:
        """A notice about the edition itself (edition 4's)."""

    # -- the walk --------------------------------------------------------------------------------

    def _manifest(self) -> Manifest | None:
        self._no_unknown((), self.data, self.TOP)
        refused = self.framework_refusals()
        general = self._table(("general",), self.data.get("general"), self.GENERAL, required=True)
        if general is not None:
            self.noticed(general)
            for key in self.REQUIRED:
                self._require(("general",), self.data["general"], key)
        name = (general or {}).get("name")
        if name is not None and not NAME_RE.match(name):
            self._fail(("general", "name"), f'"{name}" is not a valid kernel name (lowercase letters, digits '
                       "and -, starting with a letter and ending with a letter or digit, as kernel-builder "
                       "requires)")
        # None when [general] backends is missing or bad (already reported): kernels are not matched against it
        backends = self._check(self._backends, general["backends"]) if general and "backends" in general else None
        torch, noarch = self._check(self._framework, general or {}, refused, default=(None, None))
        general = general or {}
        hub = self._table(("general", "hub"), general.get("hub"), HUB) or {}
        by_backend = {b: self._table(("general", b), general.get(b), spec) or {}
                      for b, spec in GENERAL_BY_BACKEND.items()}
        cuda = by_backend["cuda"]
        for key in ("minver", "maxver"):
            if key in cuda:
                self._check(self._version, ("general", "cuda", key), cuda[key])
        if "manylinux" in general and (problem := _policy_error(general["manylinux"])):
            self._fail(("general", "manylinux"), problem)
        check_layers = self._table(("general", "check-layers"), general.get("check-layers"), CHECK_LAYERS) or {}
        for entry in check_layers.get("map", ()):
            if not LAYER_MAP.match(entry):
                self._fail(("general", "check-layers", "map"), f"{entry!r}: expected LAYER=KERNEL_LAYER, a "
                           "transformers layer name and the kernel's layer "
                           "(\"RMSNorm=RMSNorm\", \"rotary_pos_emb=RotaryPosEmb\")")
        layout = self._check(self._build_layout, general, default="files")
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
        assert name is not None and backends is not None  # each is missing or bad only with its error recorded
        return Manifest(
            path=self.path, edition=self.EDITION, name=name, backends=backends, version=general.get("version"),
            license=general.get("license"), upstream=general.get("upstream"), source=general.get("source"),
            python_depends=python_depends, kernel_depends=kernel_depends,
            backend_python_depends=backend_python_depends, backend_kernel_depends=backend_kernel_depends,
            hub_repo_id=hub.get("repo-id"), hub_branch=hub.get("branch"),
            cuda_minver=cuda.get("minver"), cuda_maxver=cuda.get("maxver"),
            torch=torch, noarch=noarch, kernels=kernels, kernel_builder=self.kernel_builder, lines=self.lines,
            manylinux=general.get("manylinux"), build_layout=layout,
            check_layers_map=tuple(check_layers.get("map", ())), check_layers_model=check_layers.get("model"),
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

    def _build_layout(self, general: dict) -> str:
        return "files"  # before edition 6 a variant's files are always staged as they are

    def _backends(self, values: list[str]) -> tuple[str, ...]:
        if not values:
            raise self.w.error(("general", "backends"), f"expected at least one of {', '.join(BACKENDS)}")
        for b in values:
            if b not in BACKENDS:
                raise self.w.error(("general", "backends"), f'unknown backend "{b}" (known: {", ".join(BACKENDS)})')
        return tuple(dict.fromkeys(values))

    def _framework(self, general: dict, refused: bool) -> tuple[TorchSection | None, NoarchSection | None]:
        has_torch, has_noarch = "torch" in self.data, "torch-noarch" in self.data or self.universal(general)
        if has_torch and has_noarch:
            raise self.w.error(("torch-noarch",), "a kernel has exactly one of [torch] and [torch-noarch]")
        if not (has_torch or has_noarch):
            raw = self.data.get("general")
            retired_universal = (("general", "universal") in self.RETIRED and isinstance(raw, dict)
                                 and "universal" in raw)
            if refused or retired_universal:
                return None, None  # a framework kbuild does not build, or a retired `universal`: said already
            raise self.w.error(("general",),
                               "missing framework table: add [torch] (compiled) or [torch-noarch] (Python/Triton)")
        if has_noarch:
            t = self._table(("torch-noarch",), self.data.get("torch-noarch", {}), self.NOARCH)
            if t is None:
                return None, None
            cap_key = self._check(self._spelling, t, self.NOARCH_CAPABILITIES)
            rocm_key = self._check(self._spelling, t, self.NOARCH_ROCM)
            caps = self._check(self._capabilities, ("torch-noarch", cap_key), t.get(cap_key)) if cap_key else None
            rocm = tuple(t.get(rocm_key, ())) if rocm_key else ()
            return None, NoarchSection(tuple(t.get("pyext", ("py", "pyi"))), caps, rocm)
        t = self._table(("torch",), self.data["torch"], TORCH)
        if t is None:
            return None, None
        for key in ("minver", "maxver"):
            if key in t:
                self._check(self._version, ("torch", key), t[key])
        src = self._check(self._paths, ("torch", "src"), t.get("src", []))  # None: reported
        if src == () and self.data.get("kernel"):
            self._fail(("torch", "src"),
                       "missing: [torch] needs the binding sources (e.g. torch-ext/torch_binding.cpp)")
        return TorchSection(
            src=src or (),
            include=tuple(t.get("include", ())),
            pyext=tuple(t.get("pyext", ("py", "pyi"))), minver=t.get("minver"), maxver=t.get("maxver"),
            cxx_flags=tuple(t.get("cxx-flags", ())), stable_abi=self._check(self._stable_abi, t.get("stable-abi")),
        ), None

    def _spelling(self, table: dict, spellings: tuple[str, ...]) -> str | None:
        """Which of a key's accepted spellings `table` uses (None: none); two at once is an error."""
        used = [key for key in spellings if key in table]
        if len(used) > 1:
            raise self.w.error(("torch-noarch", used[1]), f"{used[0]} and {used[1]} are one key: write it once")
        return used[0] if used else None

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
        if self.SELECTOR not in body:
            self._missing_selector(keys, body)
            return None
        backend = self.kernel_backend(keys + (self.SELECTOR,), body[self.SELECTOR])
        if backends is not None and backend not in backends:
            raise self.w.error(keys + (self.SELECTOR,),
                               f'"{body[self.SELECTOR]}" is a {backend} kernel, and {backend} is not in '
                               f'[general] backends ({", ".join(backends)})' if self.SELECTOR != "backend" else
                               f'"{backend}" is not in [general] backends ({", ".join(backends)})')
        spec = {self.SELECTOR: "str", **KERNEL_COMMON, **KERNEL_BY_BACKEND.get(backend, {})}
        t = self._table(keys, body, spec, backend_note=backend)
        assert t is not None  # None only for a value that is no table, and body is one (checked above)
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
            cuda_capabilities=self._check(self._capabilities, keys + ("cuda-capabilities",),
                                          t.get("cuda-capabilities")),
            cuda_flags=tuple(t.get("cuda-flags", ())), cuda_minver=t.get("cuda-minver"),
            rocm_archs=tuple(t.get("rocm-archs", ())), hip_flags=tuple(t.get("hip-flags", ())),
            sycl_flags=tuple(t.get("sycl-flags", ())),
        )

    def _missing_selector(self, keys, body: dict) -> None:
        """A kernel section without its SELECTOR: its other keys are still checked (against every
        backend's), and a misspelt SELECTOR (`bakend`) is reported as the unknown key it is, with
        the suggestion, instead of as a missing key."""
        backend_keys = {k: v for s in KERNEL_BY_BACKEND.values() for k, v in s.items()}
        every = {self.SELECTOR: "str", **KERNEL_COMMON, **backend_keys}
        self._table(keys, body, every)
        if not any(suggestion(key, (self.SELECTOR,)) for key in body if key not in every):
            self._fail(keys + (self.SELECTOR,), self.missing_selector_message())

    def missing_selector_message(self) -> str:
        return f"missing required key (one of {', '.join(BACKENDS)})"

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
            pin = self._table(keys, entry, KERNEL_DEPENDENCY)
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
                other = [b for b, s in KERNEL_BY_BACKEND.items() if key in s]
                retired = self.RETIRED.get(keys + (key,))
                if retired is None and keys[:1] == ("kernel",) and len(keys) == 2:
                    retired = self.RETIRED_KERNEL_KEYS.get(key)
                if retired is not None:
                    self._fail(keys + (key,), retired)
                elif backend_note and other:
                    self._fail(keys + (key,), f'only valid for {self.kind(other[0])}, this kernel is '
                               f'"{self.kind(backend_note).split()[-1]}"')
                else:
                    self._fail(keys + (key,), f"unknown key (expected one of: {', '.join(allowed)})"
                               + suggestion(key, allowed))
            elif self._check(self._type, keys + (key,), v, spec[key], default=False) is not False:
                good[key] = v
        return good

    def _no_unknown(self, keys, table: dict, allowed) -> None:
        for key in table:
            if key not in allowed:
                self._fail(keys + (key,), f"unknown table (expected one of: {', '.join(allowed)})"
                           + suggestion(key, allowed))

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
            raise self.w.error(keys,
                               "no known capability left: name at least one (or leave the key out for the defaults)")
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


def _policy_error(policy: str) -> str | None:
    from builder.project.manylinux import policy_error  # noqa: PLC0415 - cost: auditwheel's policies (~50 ms), only for a [general] manylinux

    return policy_error(policy)
