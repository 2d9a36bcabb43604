"""Toolchain provisioning: a torch environment per torch release and each backend's toolkit that
comes from PyPI, cached under one folder (`~/.cache/kbuild/toolchains/` unless the CLI says otherwise).

    torch-2.13.0/   a venv holding exactly torch==2.13.0 (pip's default build, or a backend's device
                    build from the torch index: `torch_python(..., device="cuda")`)
    cuda-13.2/      a backend's toolkit, a venv made by `pip_toolchain` as the backend says (CUDA's:
                    NVIDIA's cuda-toolkit wheels, builder/backends/cuda_wheels.py)
    cutlass-4.2/    the headers of PyPI's nvidia-cutlass 4.2.0.0 (`cutlass_X_Y` dependencies)
    sysroot-2.28/   glibc 2.28 headers and link stubs, libstdc++ held to manylinux_2_28 (sysroot.py)
    .<name>.lock    held while <name> is installed, so two kbuild processes install it once
    <name>.install.log   pip's output of the last install

A toolchain is complete when its marker `kbuild-toolchain.json` exists: it is written last, after
the environment was built in `.<name>.tmp-<pid>`, renamed into place and checked. A complete
toolchain is used as is (no pip call); an interrupted or failed install leaves nothing behind.
The library never reads environment variables: the CLI resolves them (builder/commands/arguments.py: open_store).
"""

from __future__ import annotations

import builtins
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from builder.backends import BACKENDS, Backend
from builder.config.environment import PYPI
from builder.toolchains.toolchain import TorchInfo, probe_torch
from kbuild_common import proc
from kbuild_common.errors import KbuildError, ToolchainError

MARKER = "kbuild-toolchain.json"
_TORCH_VERSION = re.compile(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")
# the backends whose variants need torch's device build; a torch's marker keeps `torch_<name>`, the
# release of each such build it is (None: another build)
_DEVICE_BUILDS = [b for b in BACKENDS.values() if b.torch_device_build]
# a backend's toolkit table ("cuda") -> the backend: the marker kind of its toolkit in the store
_TOOLKITS = {b.toolkit_table: b for b in BACKENDS.values() if b.toolkit_table}


@dataclass(frozen=True)
class ToolchainRecord:
    name: str          # torch-2.13.0, cuda-13.2
    kind: str          # "torch" | a backend's toolkit table ("cuda") | "cutlass" | "sysroot"
    version: str       # 2.13.0, 13.2
    path: str
    size_bytes: int
    created: str       # ISO 8601, UTC
    detail: str = ""   # "CPU build (2.13.0+cpu)", "nvcc 13.2.86 (cuda-toolkit[nvcc,cccl]==13.2.*)"


class PipToolchain(Protocol):
    """A toolchain the store makes with one `pip install` into a venv of its own, as a backend
    describes its toolkit (CUDA: builder/backends/cuda_wheels.py's CudaWheels). The store holds the
    lock, builds the venv in `.<name>.tmp-<pid>`, runs pip, moves the venv into place and writes the
    marker last; the toolchain says where its files landed and checks them (a ToolchainError of one
    line when they are wrong)."""

    name: str         # the store's folder: "cuda-13.2"
    kind: str         # the marker's kind: the backend's toolkit table, "cuda"
    requirement: str  # what pip installs

    def ready(self, marker: dict) -> bool: ...  # whether the marker of a folder of this kind will do

    def found(self, venv: Path) -> dict: ...  # what pip put in the venv, checked before it moves

    def marker(self, dest: Path, found: dict) -> dict: ...  # the marker's fields, checked in place at `dest`


class ToolchainStore:
    """The toolchains under `root`. `log` gets one line per long step (installs, waits)."""

    def __init__(self, root: Path, base_python: str = sys.executable, torch_index: str = PYPI,
                 log: Callable[[str], None] | None = None, probe_dir: Path | None = None):
        self.root = Path(root).absolute()
        # where torch and nvcc probes are cached: the builder's own cache when it passes one,
        # so a build right after `kbuild toolchain install` does not probe again
        self.probe_dir = probe_dir or self.root / ".probe"
        self.base_python = base_python
        self.torch_index = torch_index
        self._log = log or (lambda line: None)

    # -- torch -------------------------------------------------------------------------------

    def torch_python(self, version: str, device: str | None = None, reuse: Sequence[str] = ()) -> str:
        """Path of a python whose torch is exactly `version`: the first interpreter of `reuse` that
        fits, else the store's torch-<version>, installed if missing. `device`, a compiled backend's
        name ("cuda"), asks for that backend's device build of torch, from the store's torch index
        (a build of `reuse` must be one too); None: pip's default build."""
        build = _device_build(device)
        if not _TORCH_VERSION.fullmatch(version):
            raise ToolchainError(f"torch version {version!r}: expected an exact release such as 2.13.0")
        for python in reuse:
            info = self._probe(python)
            if info and _release(info.torch_version) == version and (not build or build.torch_device_version(info)):
                return python
        name = f"torch-{version}"
        dest = self.root / name
        if self._torch_ready(dest, version, build):
            return str(dest / "bin" / "python")
        with self._locked(name):
            marker = _read_marker(dest)
            if self._torch_ready(dest, version, build):
                pass  # another process installed it while we waited
            elif (build and marker and marker.get("kind") == "torch" and marker.get("version") == version
                  and (dest / "bin" / "python").exists()):
                self._upgrade_torch(name, version, build)  # another build, and the device's is wanted now
            else:
                self._install_torch(name, version, build)
        return str(dest / "bin" / "python")

    def _torch_ready(self, dest: Path, version: str, device: Backend | None) -> bool:
        marker = _read_marker(dest)
        return bool(marker and marker.get("kind") == "torch" and marker.get("version") == version
                    and (not device or marker.get(f"torch_{device.name}")) and (dest / "bin" / "python").exists())

    def _install_torch(self, name: str, version: str, device: Backend | None) -> None:
        dest = self.root / name
        source = f"{device.toolkit_label} build from {self.torch_index}" if device else "pip's default build"
        self._log(f"installing torch {version} ({source}) into {dest}")
        with self._building(name) as (tmp, pip):
            python = str(tmp / "bin" / "python")
            if device:
                wheel = self._download_torch(pip, python, version, tmp / "wheels")
                pip(_pip_install(python, str(wheel)), f"pip install {wheel.name}")
                shutil.rmtree(tmp / "wheels")
            else:
                pip(_pip_install(python, f"torch=={version}"), f"pip install torch=={version}")
            self._move_into_place(tmp, dest)
            info = self._check_torch(str(dest / "bin" / "python"), version, device)
            self._write_marker(dest, kind="torch", version=version, requirement=f"torch=={version}",
                               torch_version=info.torch_version, **_device_builds(info),
                               source=self.torch_index if device else "pip configuration")

    def _upgrade_torch(self, name: str, version: str, device: Backend) -> None:
        dest = self.root / name
        python = str(dest / "bin" / "python")
        self._log(f"upgrading torch {version} in {dest} to the {device.toolkit_label} build from {self.torch_index}")
        with self._building(name, upgrading=dest) as (tmp, pip):
            wheel = self._download_torch(pip, python, version, tmp / "wheels")
            (dest / MARKER).unlink()  # incomplete from here on: a failure removes the environment
            pip(_pip_install(python, str(wheel)), f"pip install {wheel.name}")
            info = self._check_torch(python, version, device)
            self._write_marker(dest, kind="torch", version=version, requirement=f"torch=={version}",
                               torch_version=info.torch_version, **_device_builds(info), source=self.torch_index)

    def _download_torch(self, pip, python: str, version: str, folder: Path) -> Path:
        """torch==version's wheel from the index alone (not the user's find-links, whose local
        builds such as 2.13.0+cpu would win)."""
        pip([python, "-m", "pip", "download", "--isolated", "--no-deps", "--only-binary=:all:",
             "--progress-bar", "off", "--index-url", self.torch_index, f"torch=={version}", "-d", str(folder)],
            f"pip download torch=={version} from {self.torch_index}")
        wheels = sorted(folder.glob("torch-*.whl"))
        if len(wheels) != 1:
            raise ToolchainError(f"pip download torch=={version} left {len(wheels)} wheel(s) in {folder}")
        return wheels[0]

    def _check_torch(self, python: str, version: str, device: Backend | None) -> TorchInfo:
        info = probe_torch(python, self.probe_dir)
        if _release(info.torch_version) != version:
            raise ToolchainError(f"torch {version} was wanted but {python} has torch {info.torch_version}")
        if device and not device.torch_device_version(info):
            raise ToolchainError(
                f"torch {version} from {self.torch_index} is not a {device.toolkit_label} build: {python} has torch "
                f"{info.torch_version} ({device.torch_build_field} is None)", hint=device.torch_index_hint)
        return info

    def _probe(self, python: str) -> TorchInfo | None:
        try:
            return probe_torch(python, self.probe_dir)
        except KbuildError:
            return None

    # -- a backend's toolkit from PyPI ----------------------------------------------------------

    def pip_toolchain(self, toolchain: PipToolchain) -> tuple[Path, dict]:
        """`toolchain`'s folder in the store and its marker, installed first unless it is there and
        ready (builder/backends/cuda_wheels.py is CUDA's)."""
        dest = self.root / toolchain.name
        if not self._pip_ready(dest, toolchain):
            with self._locked(toolchain.name):
                if not self._pip_ready(dest, toolchain):
                    self._install_pip_toolchain(toolchain)
        return dest, _complete_marker(dest)

    def _pip_ready(self, dest: Path, toolchain: PipToolchain) -> bool:
        marker = _read_marker(dest)
        return bool(marker and marker.get("kind") == toolchain.kind and toolchain.ready(marker))

    def _install_pip_toolchain(self, toolchain: PipToolchain) -> None:
        dest = self.root / toolchain.name
        self._log(f"installing {toolchain.requirement} into {dest}")
        with self._building(toolchain.name) as (tmp, pip):
            requirement = toolchain.requirement
            pip(_pip_install(str(tmp / "bin" / "python"), requirement), f"pip install {requirement}")
            found = toolchain.found(tmp)
            self._move_into_place(tmp, dest)
            self._write_marker(dest, kind=toolchain.kind, **toolchain.marker(dest, found))

    # -- CUTLASS -----------------------------------------------------------------------------

    def cutlass_includes(self, release: str, requirement: str) -> tuple[str, ...]:
        """The include folders of CUTLASS `release` (include/ and tools/util/include/, as CUTLASS's
        own CMake exports them), installed from `requirement` if missing. Headers only: the
        wheel's Python dependencies are not installed."""
        name = "cutlass-" + ".".join(release.split(".")[:2])
        dest = self.root / name
        if not self._cutlass_ready(dest, release):
            with self._locked(name):
                if not self._cutlass_ready(dest, release):
                    self._install_cutlass(name, release, requirement)
        dirs = tuple(str(dest / d) for d in _complete_marker(dest)["include"])
        if not (Path(dirs[0]) / "cutlass" / "cutlass.h").is_file():
            raise ToolchainError(f"{name}: {dirs[0]}/cutlass/cutlass.h is missing",
                                 hint=f"kbuild toolchain prune {name}, then install it again")
        return dirs

    def _cutlass_ready(self, dest: Path, release: str) -> bool:
        marker = _read_marker(dest)
        return bool(marker and marker.get("kind") == "cutlass" and marker.get("release") == release)

    def _install_cutlass(self, name: str, release: str, requirement: str) -> None:
        dest = self.root / name
        self._log(f"installing {requirement} (headers) into {dest}")
        with self._building(name, venv=False) as (tmp, pip):
            pip([self.base_python, "-m", "pip", "install", "--no-deps", "--progress-bar", "off",
                 "--target", str(tmp), requirement], f"pip install {requirement}")
            source = tmp / "cutlass_library" / "source"
            include = [source / "include", source / "tools" / "util" / "include"]
            if not (include[0] / "cutlass" / "cutlass.h").is_file():
                raise ToolchainError(f"{requirement} installed no cutlass_library/source/include/cutlass/cutlass.h "
                                     f"into {tmp}", hint="check [cutlass] in builder/versions.toml")
            found = [str(d.relative_to(tmp)) for d in include if d.is_dir()]
            os.rename(tmp, dest)
            self._write_marker(dest, kind="cutlass", version=".".join(release.split(".")[:2]), release=release,
                               requirement=requirement, include=found)

    # -- glibc sysroots ----------------------------------------------------------------------

    def sysroot(self, glibc: str, requirement: str, cxx: str = "c++") -> Path:
        """The sysroot for glibc `glibc` ("2.28") and the C++ compiler `cxx`, assembled from
        `requirement` (zig) if missing or made for another compiler. Zig itself is only needed
        while assembling and is not kept."""
        from builder.toolchains.sysroot import compiler_id  # noqa: PLC0415 - cost: auditwheel's policies (~50 ms), only sysroots pay

        name = f"sysroot-{glibc}"
        dest = self.root / name
        compiler = compiler_id(cxx)
        if not self._sysroot_ready(dest, requirement, compiler):
            with self._locked(name):
                if not self._sysroot_ready(dest, requirement, compiler):
                    self._install_sysroot(name, glibc, requirement, cxx)
        return dest / _complete_marker(dest)["root"]

    def _sysroot_ready(self, dest: Path, requirement: str, compiler: str) -> bool:
        marker = _read_marker(dest)
        return bool(marker and marker.get("kind") == "sysroot" and marker.get("requirement") == requirement
                    and marker.get("compiler") == compiler)

    def _install_sysroot(self, name: str, glibc: str, requirement: str, cxx: str) -> None:
        from builder.toolchains.sysroot import assemble  # noqa: PLC0415 - cost: auditwheel's policies (~50 ms), only sysroots pay

        dest = self.root / name
        self._log(f"building {name} from {requirement} into {dest}")
        with self._building(name, venv=False) as (tmp, pip):
            pip([self.base_python, "-m", "pip", "install", "--no-deps", "--progress-bar", "off",
                 "--target", str(tmp / "zig"), requirement], f"pip install {requirement}")
            zig = tmp / "zig" / "ziglang"
            if not (zig / "zig").is_file():
                raise ToolchainError(f"{requirement} installed no ziglang/zig into {tmp / 'zig'}",
                                     hint="check [sysroot] in builder/versions.toml")
            # A new folder name per install: compile commands name it, so a rebuilt sysroot means
            # new commands (gcc's -MMD does not list system headers, nor does the cache key).
            root = f"root-{os.urandom(4).hex()}"
            record = assemble(zig, tmp / root, glibc, cxx=cxx, log=self._log)
            shutil.rmtree(tmp / "zig")
            os.rename(tmp, dest)
            self._write_marker(dest, kind="sysroot", version=glibc, requirement=requirement, root=root, **record)

    # -- the store ---------------------------------------------------------------------------

    def list(self) -> list[ToolchainRecord]:
        records = []
        for folder in sorted(self.root.iterdir()) if self.root.is_dir() else ():
            marker = None if folder.name.startswith(".") else _read_marker(folder)
            if marker:
                records.append(ToolchainRecord(
                    name=folder.name, kind=marker.get("kind", "?"), version=marker.get("version", "?"),
                    path=str(folder), size_bytes=disk_usage(folder), created=marker.get("created", ""),
                    detail=_detail(marker)))
        return records

    def remove(self, name: str) -> None:
        dest = self._named(name)
        if not dest.is_dir():
            installed = ", ".join(r.name for r in self.list()) or "none"
            raise ToolchainError(f"no toolchain {name} in {self.root} (installed: {installed})")
        with self._locked(name, wait=False):
            doomed = self.root / f".{name}.tmp-{os.getpid()}"
            os.rename(dest, doomed)  # gone at once; a crash mid-delete leaves a leftover prune removes
            shutil.rmtree(doomed)
            (self.root / f"{name}.install.log").unlink(missing_ok=True)

    def leftovers(self) -> builtins.list[Path]:  # (`list` here is the method above)
        """Build folders of dead processes (`.<name>.tmp-<pid>`) and toolchains without their marker
        that nobody is installing: what an interrupted kbuild left behind."""
        found = []
        for entry in sorted(self.root.iterdir()) if self.root.is_dir() else ():
            m = re.fullmatch(r"\.(.+)\.tmp-(\d+)", entry.name)
            if m and entry.is_dir() and not _alive(int(m[2])):
                found.append(entry)
            elif not entry.name.startswith(".") and entry.is_dir() and not (entry / MARKER).exists():
                if not self._busy(entry.name):
                    found.append(entry)
            elif entry.name.endswith(".install.log") and not (self.root / entry.name[:-12]).exists():
                if not self._busy(entry.name[:-12]):
                    found.append(entry)  # the log of a failed install
        return found

    def remove_leftover(self, path: Path) -> None:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def _named(self, name: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]*", name):
            raise ToolchainError(f"{name!r} is not a toolchain name (e.g. torch-2.13.0, cuda-13.2)")
        return self.root / name

    # -- installing --------------------------------------------------------------------------

    @contextmanager
    def _locked(self, name: str, wait: bool = True) -> Iterator[None]:
        from filelock import FileLock, Timeout  # noqa: PLC0415 - cost: filelock and asyncio (~40 ms), only installs pay

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / f".{name}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if not wait:
                raise ToolchainError(f"{name} is being installed by another kbuild process "
                                     f"({lock.lock_file})") from None
            self._log(f"waiting for another kbuild process installing {name} ({lock.lock_file})")
            lock.acquire()
        try:
            yield
        finally:
            lock.release()

    def _busy(self, name: str) -> bool:
        from filelock import FileLock, Timeout  # noqa: PLC0415 - cost: filelock and asyncio (~40 ms), only installs pay

        lock = FileLock(str(self.root / f".{name}.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            return True
        lock.release()
        return False

    @contextmanager
    def _building(self, name: str, upgrading: Path | None = None, venv: bool = True):
        """Under the lock: a fresh `.<name>.tmp-<pid>` venv (or, when `upgrading` or not `venv`, an
        empty folder) and a `pip(cmd, what)` that logs to <name>.install.log. On any failure or
        interrupt the tmp folder goes, and so does a toolchain left without its marker."""
        dest = self.root / name
        tmp = self.root / f".{name}.tmp-{os.getpid()}"
        log_path = self.root / f"{name}.install.log"
        for stale in self.root.glob(f".{name}.tmp-*"):  # we hold the lock: these are dead builds
            shutil.rmtree(stale, ignore_errors=True)
        if not upgrading and dest.exists():
            shutil.rmtree(dest)  # renamed into place, then interrupted before its marker
        try:
            with open(log_path, "w", encoding="utf-8") as log_file:
                def pip(cmd: list[str], what: str) -> None:
                    _run_logged(cmd, what, log_file, log_path)

                if upgrading or not venv:
                    tmp.mkdir()
                else:
                    pip([self.base_python, "-m", "venv", str(tmp)], "python -m venv")
                yield tmp, pip
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            if dest.exists() and not (dest / MARKER).exists():
                shutil.rmtree(dest, ignore_errors=True)
            raise
        shutil.rmtree(tmp, ignore_errors=True)

    def _move_into_place(self, tmp: Path, dest: Path) -> None:
        # Scripts in bin/ (pip, torchrun, activate) and pyvenv.cfg name the tmp folder: point them
        # at the final one. The venv itself works anywhere as long as pip runs as `python -m pip`.
        old, new = str(tmp).encode(), str(dest).encode()
        for path in [*(tmp / "bin").iterdir(), tmp / "pyvenv.cfg"]:
            if path.is_file() and not path.is_symlink() and path.stat().st_size < 1 << 20:
                data = path.read_bytes()
                if old in data and (data.startswith(b"#!") or path.name.startswith("activate")
                                    or path.name == "pyvenv.cfg"):
                    path.write_bytes(data.replace(old, new))
        os.rename(tmp, dest)

    def _write_marker(self, dest: Path, **fields) -> None:
        fields["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        pythons = sorted(dest.glob("lib/python3*"))
        fields["python"] = pythons[0].name.removeprefix("python") if pythons else None
        tmp = dest / f".{MARKER}.tmp"
        tmp.write_text(json.dumps(fields, indent=2) + "\n")
        tmp.replace(dest / MARKER)


def _pip_install(python: str, *requirements: str) -> list[str]:
    # `python -m pip`, never bin/pip: the venv is built in a tmp folder and renamed.
    return [python, "-m", "pip", "install", "--progress-bar", "off", *requirements]


def _run_logged(cmd: list[str], what: str, log_file, log_path: Path) -> None:
    """Run `cmd` with its output going to the install log; a failure is one line ending with the log."""
    log_file.write(f"$ {shlex.join(cmd)}\n")
    log_file.flush()
    child = proc.stream(cmd)
    output = child.stdout
    assert output is not None  # proc.stream pipes stdout
    last_error = last_line = ""
    try:
        for line in output:
            log_file.write(line)
            text = line.strip()
            if text:
                last_line = text
                if text.startswith("ERROR:") and not text.startswith("ERROR: ResolutionImpossible"):
                    last_error = text  # (ResolutionImpossible only links pip's docs; the line before says why)
        code = child.wait()
    except BaseException:
        child.kill()
        child.wait()
        raise
    finally:
        output.close()
        log_file.flush()
    if code != 0:
        detail = (last_error or last_line or "no output").rstrip(".")
        raise ToolchainError(f"{what} failed (exit {code}): {detail}; log: {log_path}")


def _read_marker(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _complete_marker(dest: Path) -> dict:
    """The marker of the toolchain at `dest`, just found ready or installed; a one-line error if it
    has gone since (another process removed it)."""
    marker = _read_marker(dest)
    if marker is None:
        raise ToolchainError(f"{dest.name}: {dest / MARKER} is missing or unreadable",
                             hint=f"kbuild toolchain prune {dest.name}, then install it again")
    return marker


def _device_build(name: str | None) -> Backend | None:
    """The backend named `name` whose device build of torch is wanted (None: none); a one-line
    ToolchainError for a name that is no backend with a device build of torch."""
    if name is None:
        return None
    backend = BACKENDS.get(name)
    if backend is None or not backend.torch_device_build:
        known = ", ".join(b.name for b in _DEVICE_BUILDS) or "none"
        raise ToolchainError(f"no device build of torch for backend {name!r}: known ones are {known}")
    return backend


def _device_builds(info: TorchInfo) -> dict[str, str | None]:
    """What a torch's marker keeps of its build: `torch_<backend>`, that backend's release or None."""
    return {f"torch_{b.name}": b.torch_device_version(info) for b in _DEVICE_BUILDS}


def _detail(marker: dict) -> str:
    if marker.get("kind") == "torch":
        builds = [f"{b.toolkit_label} {marker[f'torch_{b.name}']}" for b in _DEVICE_BUILDS
                  if marker.get(f"torch_{b.name}")]
        return f"{builds[0] if builds else 'CPU'} build ({marker.get('torch_version')})"
    if isinstance(kind := marker.get("kind"), str) and (backend := _TOOLKITS.get(kind)):
        return backend.stored_toolkit_detail(marker)
    if marker.get("kind") == "cutlass":
        return f"CUTLASS {marker.get('release')} headers ({marker.get('requirement')})"
    if marker.get("kind") == "sysroot":
        return f"glibc {marker.get('glibc')} sysroot ({marker.get('requirement')}, {marker.get('compiler')})"
    return ""


def _release(torch_version: str) -> str:
    return torch_version.split("+")[0]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def disk_usage(path: Path) -> int:
    """Bytes on disk under `path` (like du: hard links once, symlinks not followed)."""
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_blocks * 512 if path.exists() or path.is_symlink() else 0
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [str(path)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total
