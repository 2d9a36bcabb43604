"""Where a mapped layer comes from: a hub repo pinned to a version or revision
(`LayerRepository`), a local kernel folder (`LocalLayerRepository`) or a kernels.lock entry
(`LockedLayerRepository`). Each loads through kbuild's own loader, so pins, locks, digest checks,
trust and hubs apply as they do to get_kernel; then the layer is found in the kernel's `layers`
and checked to be a stateless drop-in for the module it replaces."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidLayer, InvalidRequest

if TYPE_CHECKING:
    from torch import nn


class LayerRepository:
    """Layer `layer_name` of hub repo `repo_id`, pinned by `version=1`, `revision="main"` (a branch,
    tag or commit) or "org/repo@v1" (exactly one). `hub` as for get_kernel (by default
    $KBUILD_HUB, else $HF_ENDPOINT); `trust_remote_code` and `check_arch` too."""

    def __init__(self, repo_id: str, *, layer_name: str, revision: str | None = None, version: int | None = None,
                 trust_remote_code: bool | list[str] = False, hub: str | None = None, check_arch: bool = True):
        name, at, pin = str(repo_id).partition("@")
        pins = sum(p is not None for p in (revision, version)) + bool(at)
        where = f"LayerRepository({repo_id!r}, layer_name={layer_name!r})"
        if pins > 1:
            raise InvalidRequest(f"{where}: Either a revision or a version must be specified, not both")
        if pins == 0:
            raise InvalidRequest(f"{where}: Either a revision or a version must be specified "
                                 "(version=1, revision='main', or 'org/repo@v1')")
        _check_layer_name(layer_name, where)
        self.repo_id, self.layer_name, self.hub = str(repo_id), layer_name, hub
        self.revision, self.version = revision, version
        self.trust_remote_code = tuple(trust_remote_code) if isinstance(trust_remote_code, list) else trust_remote_code
        self.check_arch = _check_arch(check_arch, where)

    def load(self, backend: str | None = None):
        from ..hub_loader import get_kernel  # noqa: PLC0415 - cost: kbuild.layers loads with a model's code, the loader (~40 ms) on first use

        trust = list(self.trust_remote_code) if isinstance(self.trust_remote_code, tuple) else self.trust_remote_code
        kernel = get_kernel(self.repo_id, revision=self.revision, version=self.version, hub=self.hub,
                            backend=backend, trust_remote_code=trust, check_arch=self.check_arch)
        return find_layer(kernel, self)

    def _key(self):
        return (self.repo_id, self.layer_name, self.revision, self.version, self.trust_remote_code, self.hub,
                self.check_arch)

    def __eq__(self, other):
        return type(other) is type(self) and other._key() == self._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self) -> str:
        pin = "" if "@" in self.repo_id else (f"@v{self.version}" if self.version is not None else f"@{self.revision}")
        return f"{self.repo_id}{pin}:{self.layer_name}"

    __repr__ = __str__


class LocalLayerRepository:
    """Layer `layer_name` of the kernel at `repo_path` (a project, build folder or variant folder);
    `check_arch` as for get_local_kernel."""

    def __init__(self, repo_path: str | Path, *, layer_name: str, check_arch: bool = True):
        where = f"LocalLayerRepository({str(repo_path)!r})"
        _check_layer_name(layer_name, where)
        self.repo_path, self.layer_name = Path(repo_path), layer_name
        self.check_arch = _check_arch(check_arch, where)

    def load(self, backend: str | None = None):
        from ..local import get_local_kernel  # noqa: PLC0415 - cost: kbuild.layers loads with a model's code, the loader (~40 ms) on first use

        return find_layer(get_local_kernel(self.repo_path, backend, check_arch=self.check_arch), self)

    def __eq__(self, other):
        return type(other) is type(self) and (other.repo_path, other.layer_name, other.check_arch) == (
            self.repo_path, self.layer_name, self.check_arch)

    def __hash__(self):
        return hash((self.repo_path, self.layer_name, self.check_arch))

    def __str__(self) -> str:
        return f"{self.repo_path}:{self.layer_name}"

    __repr__ = __str__


class LockedLayerRepository:
    """Layer `layer_name` of `repo_id` as `lockfile` locks it (by default the kernels.lock nearest
    above the file that makes this repository, as kbuild.get_locked_kernel finds it); `check_arch`
    as for get_locked_kernel."""

    def __init__(self, repo_id: str, *, layer_name: str, lockfile: str | Path | None = None, check_arch: bool = True):
        from ..lockfile import find_lockfile  # noqa: PLC0415 - cost: kbuild.layers loads with a model's code, the loader (~40 ms) on first use

        where = f"LockedLayerRepository({repo_id!r})"
        _check_layer_name(layer_name, where)
        self.check_arch = _check_arch(check_arch, where)
        if lockfile is None:
            caller = sys._getframe(1).f_globals.get("__file__")
            lockfile = find_lockfile(Path(caller).resolve().parent if caller else Path.cwd())
        self.repo_id, self.layer_name, self.lockfile = repo_id, layer_name, Path(lockfile)

    def load(self, backend: str | None = None):
        from ..lockfile import get_locked_kernel  # noqa: PLC0415 - cost: kbuild.layers loads with a model's code, the loader (~40 ms) on first use

        return find_layer(get_locked_kernel(self.repo_id, lockfile=self.lockfile, backend=backend,
                                            check_arch=self.check_arch), self)

    def __eq__(self, other):
        return type(other) is type(self) and (other.repo_id, other.layer_name, other.lockfile, other.check_arch) == (
            self.repo_id, self.layer_name, self.lockfile, self.check_arch)

    def __hash__(self):
        return hash((self.repo_id, self.layer_name, self.lockfile, self.check_arch))

    def __str__(self) -> str:
        return f"{self.repo_id}:{self.layer_name} (locked in {self.lockfile})"

    __repr__ = __str__


KBUILD_REPOSITORIES = (LayerRepository, LocalLayerRepository, LockedLayerRepository)


def parse_shorthand(key: str, value, hub: str | None, trust_remote_code) -> LayerRepository:
    """kbuild's short spelling of a mapping entry, "org/repo@v1:LayerName"."""
    request, sep, layer = str(value).rpartition(":")
    if not sep or not request or "@" not in request or not layer.isidentifier():
        raise InvalidRequest(f"kernelize mapping {key!r}: {value!r} is not 'org/repo@v1:LayerName'")
    return LayerRepository(request, layer_name=layer, hub=hub, trust_remote_code=trust_remote_code)


def find_layer(kernel, repo):
    """The class `repo.layer_name` of the kernel's `layers` (an attribute, or a `layers` module)."""
    layers = getattr(kernel, "layers", None)
    if layers is None:
        try:
            layers = importlib.import_module(f"{kernel.__name__}.layers")
        except ModuleNotFoundError:
            raise InvalidRequest(f"kernelize: {repo} has no layers (no layers.py or layers/ in the kernel)") from None
    layer = getattr(layers, repo.layer_name, None)
    if layer is None:
        found = sorted(n for n in dir(layers) if not n.startswith("_") and isinstance(getattr(layers, n), type))
        raise InvalidRequest(f"kernelize: {repo} has no layer {repo.layer_name!r} "
                             f"(its layers: {', '.join(found) or 'none'})")
    return layer


def check_drop_in(layer, host: type[nn.Module], repo) -> None:
    """A layer may replace `host`'s forward only if it is an nn.Module with no state of its own
    (no constructor, no members beyond has_backward / can_torch_compile: it reads the host's) and
    its forward takes the same arguments, of the same kinds."""
    from torch import nn

    what = f"kernelize: layer {repo}"
    if not (isinstance(layer, type) and issubclass(layer, nn.Module)):
        raise InvalidLayer(f"{what} is not a torch.nn.Module class")
    if layer.__init__ is not nn.Module.__init__:
        raise InvalidLayer(f"{what} must not override nn.Module's constructor (a layer keeps no state: it "
                             f"reads {host.__name__}'s)")
    extra = {n for n, _ in inspect.getmembers(layer)} - {n for n, _ in inspect.getmembers(nn.Module)}
    extra -= {"forward", "has_backward", "can_torch_compile"}
    if extra:
        raise InvalidLayer(f"{what} must not contain members {host.__name__} does not have "
                             f"({', '.join(sorted(extra))}); only has_backward and can_torch_compile are allowed")
    ours, theirs = _parameters(layer.forward), _parameters(host.forward)
    if len(ours) != len(theirs):
        raise InvalidLayer(f"{what}: forward takes {len(ours)} arguments and {host.__name__}.forward "
                             f"{len(theirs)} ({_signature(layer.forward)} vs {_signature(host.forward)})")
    for mine, other in zip(ours, theirs, strict=True):
        if mine.kind != other.kind:
            raise InvalidLayer(f"{what}: forward's argument {mine.name!r} is {mine.kind.description} where "
                                 f"{host.__name__}.forward's {other.name!r} is {other.kind.description}")


def _parameters(function) -> list[inspect.Parameter]:
    return list(inspect.signature(function).parameters.values())


def _signature(function) -> str:
    return f"{function.__qualname__}{inspect.signature(function)}"


def _check_arch(value, where: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest(f"{where}: check_arch must be True or False, got {value!r}")
    return value


def _check_layer_name(layer_name, where: str) -> None:
    if not isinstance(layer_name, str) or not layer_name.isidentifier():
        raise InvalidRequest(f"{where}: layer_name must be a class name such as 'RMSNorm', got {layer_name!r}")
