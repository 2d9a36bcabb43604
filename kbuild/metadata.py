"""A built variant's metadata.json (docs/formats.md, "metadata.json"), read and checked into a
frozen record.

kbuild builds always carry `id` and `digest`; builds by kernel-builder may lack them (and older
ones lack the file), so those fields are optional unless `provenance` says kbuild made the build.
Unknown keys are kept out of the record but are not errors: the Hub side may add fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from packaging.version import InvalidVersion, Version

from .digest import ALGORITHM, METADATA
from .errors import InvalidMetadata
from .kernel_deps import KernelPin
from .variants import BACKENDS

_OURS = " (provenance says kbuild built this variant, and kbuild always records it)"


# The newest Hugging Face `kernels` release whose variant formats this loader reads (the 0.19
# names, the zip layout): a variant whose `kernels-minver` is newer needs something kbuild does
# not know yet, and is refused in the trace before anything of it is fetched or imported
# (docs/formats.md, "metadata.json").
READS_KERNELS = Version("0.19.1")
LAYOUTS = ("files", "zip")  # `build-layout`: a folder of files, or the package in <id>.zip (kernels 0.19)

PARTIAL_ARCHS = "archs-partial"  # backend key: built for fewer CUDA archs than the kernel lists


@dataclass(frozen=True)
class BackendInfo:
    type: str
    archs: tuple[str, ...] = ()
    partial: bool = False  # a development build (--cuda-archs): publish refuses it unless told


@dataclass(frozen=True)
class AbiFloor:
    """The newest C library versions the variant's libraries need (`abi` in metadata.json)."""
    glibc: str | None = None  # e.g. "2.34"
    glibcxx: str | None = None  # libstdc++'s symbol version, e.g. "3.4.29"
    manylinux: str | None = None  # e.g. "manylinux_2_34_x86_64"


_ABI_KEYS = ("glibc", "glibcxx", "cxxabi", "gcc")


@dataclass(frozen=True)
class VariantMetadata:
    path: Path | None  # the metadata.json read, None when the variant has none
    name: str | None = None
    id: str | None = None
    version: int | None = None
    license: str | None = None
    python_depends: tuple[str, ...] = ()
    kernel_depends: tuple[KernelPin, ...] = ()  # other Hub kernels it takes from kernels.get_kernel_dep
    backend: BackendInfo | None = None
    digest: dict[str, str] | None = field(default=None, compare=False)
    abi: AbiFloor | None = None
    provenance: dict[str, Any] | None = field(default=None, compare=False)
    build_layout: str = "files"
    kernels_minver: Version | None = None

    @property
    def python_name(self) -> str | None:
        return self.name.replace("-", "_") if self.name else None

    @classmethod
    def from_file(cls, path: Path) -> VariantMetadata:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise InvalidMetadata(f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
        return cls.from_dict(data, path)

    @classmethod
    def for_variant(cls, variant_dir: Path) -> VariantMetadata:
        """The variant's metadata; an empty record for old kernel-builder builds without one."""
        path = Path(variant_dir) / METADATA
        return cls.from_file(path) if path.is_file() else cls(path=None)

    @classmethod
    def from_dict(cls, data: Any, path: Path | None = None) -> VariantMetadata:
        check = _Checker(path)
        if not isinstance(data, dict):
            check.fail("top level", "a JSON object")
        provenance = check.opt(data, "provenance", dict)
        # Only our own builds promise an id and a digest; kernel-builder's older ones do not.
        ours = built_by_kbuild(provenance)
        op_id = check.opt(data, "id", str, required=ours, why=_OURS)
        if op_id is not None and not op_id.isidentifier():
            check.fail("id", "a Python identifier (it names the module and the op namespace)", op_id)
        return cls(
            path=path,
            name=check.opt(data, "name", str),
            id=op_id,
            version=check.opt(data, "version", int),
            license=check.opt(data, "license", str),
            python_depends=check.str_list(data, "python-depends"),
            kernel_depends=_kernel_depends(check, data),
            backend=_backend(check, data),
            digest=_digest(check, data, required=ours),
            abi=_abi(check, data),
            provenance=provenance,
            build_layout=_layout(check, data, op_id),
            kernels_minver=_minver(check, data),
        )


def _backend(check: _Checker, data: dict) -> BackendInfo | None:
    raw = check.opt(data, "backend", dict)
    if raw is None:
        return None
    kind = check.opt(raw, "type", str, required=True, where="backend.type")
    if kind not in BACKENDS:
        check.fail("backend.type", f"one of {', '.join(BACKENDS)}", kind)
    partial = check.opt(raw, PARTIAL_ARCHS, bool, where=f"backend.{PARTIAL_ARCHS}")
    return BackendInfo(kind, check.str_list(raw, "archs", where="backend.archs"), bool(partial))


def _layout(check: _Checker, data: dict, op_id: str | None) -> str:
    layout = check.opt(data, "build-layout", str) or "files"
    if layout not in LAYOUTS:
        check.fail("build-layout", " or ".join(f'"{x}"' for x in LAYOUTS), layout)
    if layout == "zip" and op_id is None:
        check.fail("id", 'a Python identifier: a "zip" build layout keeps the package in <id>.zip')
    return layout


def _minver(check: _Checker, data: dict) -> Version | None:
    raw = check.opt(data, "kernels-minver", str)
    if raw is None:
        return None
    try:
        return Version(raw)
    except InvalidVersion:
        check.fail("kernels-minver", 'a version such as "0.19.0"', raw)


def _kernel_depends(check: _Checker, data: dict) -> tuple[KernelPin, ...]:
    found = []
    for n, entry in enumerate(check.opt(data, "kernel-depends", list) or ()):
        where = f"kernel-depends[{n}]"
        if not isinstance(entry, dict):
            check.fail(where, 'an object like {"repo-id": "org/name", "version": 1}', entry)
        repo_id = check.opt(entry, "repo-id", str, required=True, where=f"{where}.repo-id")
        version = check.opt(entry, "version", int, where=f"{where}.version")
        revision = check.opt(entry, "revision", str, where=f"{where}.revision")
        if (version is None) == (revision is None):
            check.fail(where, "pinned by exactly one of `version` and `revision`", entry)
        found.append(KernelPin(repo_id, version, revision))
    return tuple(found)


def _abi(check: _Checker, data: dict) -> AbiFloor | None:
    raw = check.opt(data, "abi", dict)
    if raw is None:
        return None
    for key in _ABI_KEYS:
        value = check.opt(raw, key, str, where=f"abi.{key}")
        if value is not None and not all(p.isdigit() for p in value.split(".")):
            check.fail(f"abi.{key}", 'a dotted version such as "2.28"', value)
    return AbiFloor(raw.get("glibc"), raw.get("glibcxx"), check.opt(raw, "manylinux", str, where="abi.manylinux"))


def _digest(check: _Checker, data: dict, required: bool) -> dict[str, str] | None:
    raw = check.opt(data, "digest", dict, required=required, why=_OURS)
    if raw is None:
        return None
    algorithm = check.opt(raw, "algorithm", str, required=True, where="digest.algorithm")
    if algorithm != ALGORITHM:
        check.fail("digest.algorithm", f'"{ALGORITHM}"', algorithm)
    files = check.opt(raw, "files", dict, required=True, where="digest.files")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        check.fail("digest.files", "an object mapping paths to base64 digests")
    return dict(files)


class _Checker:
    """Type checks whose errors name the file and the field."""

    def __init__(self, path: Path | None):
        self.source = str(path) if path else "metadata.json"

    def fail(self, where: str, expected: str, got: Any = ...) -> NoReturn:
        found = "" if got is ... else f", got {json.dumps(got)}"
        raise InvalidMetadata(f"{self.source}: `{where}` must be {expected}{found}")

    def opt(
        self, data: dict, key: str, kind: type, *, required: bool = False, where: str | None = None, why: str = ""
    ) -> Any:
        where = where or key
        if key not in data or data[key] is None:
            if required:
                raise InvalidMetadata(f"{self.source}: `{where}` is missing{why}")
            return None
        value = data[key]
        # bool is an int subclass; a version of `true` is a mistake, not 1.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.fail(where, _TYPE_WORDS[kind], value)
        return value

    def str_list(self, data: dict, key: str, where: str | None = None) -> tuple[str, ...]:
        value = self.opt(data, key, list, where=where)
        if value is None:
            return ()
        if not all(isinstance(v, str) for v in value):
            self.fail(where or key, "a list of strings", value)
        return tuple(value)


_TYPE_WORDS = {str: "a string", int: "an integer", dict: "an object", list: "a list"}


def built_by_kbuild(provenance) -> bool:
    """kbuild records itself in the `kernel-builder` slot Hugging Face's loader requires."""
    builder = provenance.get("kernel-builder") if isinstance(provenance, dict) else None
    return isinstance(builder, dict) and builder.get("name") == "kbuild"
