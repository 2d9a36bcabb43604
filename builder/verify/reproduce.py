"""`kbuild reproduce`: rebuild a published variant from the sources and toolchain its metadata.json
records (docs/formats.md, "metadata.json") and compare the result with the hub's copy, file by file.

The published variant is fetched and verified by kbuild's loader; its `provenance` names the commit
and the kernel folder's tree id, `provenance.toolchain` the torch, nvcc, compiler and options. The
commit is checked out from a source repository into a fresh folder, the recorded torch and nvcc are
found here or provisioned through the toolchain store, and `kbuild build --variant` runs with the
recorded options. Nothing of the user's own build folders is touched.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from builder.backends import BACKENDS
from builder.stage.toolchain_record import compiler, ninja_version
from builder.toolchains.toolchain import probe_torch
from builder.toolchains.versions import load_versions_table
from kbuild.digest import SIGNATURES, variant_files
from kbuild.errors import KernelError
from kbuild.hub_loader import install_kernel
from kbuild_common import proc
from kbuild_common.errors import BuildError, CommandError, KbuildError, ToolchainError, UsageError

if TYPE_CHECKING:
    from builder.report import Reporter
    from builder.toolchains.provision import ToolchainStore

STATES = ("same", "differs", "missing", "extra")  # missing: published, not rebuilt; extra: the other way


@dataclass(frozen=True)
class FileRow:
    path: str
    state: str
    published: str | None  # sha256 hex
    rebuilt: str | None


@dataclass(frozen=True)
class Recorded:
    """What the published variant's metadata.json says it was built from."""

    variant: str
    commit: str
    tree: str
    toolchain: dict | None  # None: a Python-only variant (nothing compiled)
    archs: tuple[str, ...]
    partial: bool


@dataclass
class Reproduction:
    request: str
    recorded: Recorded
    kernel_folder: str  # in the source repository; "." for its root
    notes: list[str] = field(default_factory=list)  # toolchain differences the rebuild went on with
    files: list[FileRow] = field(default_factory=list)
    kept: Path | None = None  # the rebuilt variant folder, with --keep

    @property
    def identical(self) -> bool:
        return bool(self.files) and all(row.state == "same" for row in self.files)

    def as_json(self) -> dict:
        r = self.recorded
        return {"request": self.request, "variant": r.variant, "commit": r.commit, "tree": r.tree,
                "kernel-folder": self.kernel_folder, "toolchain": r.toolchain, "notes": self.notes,
                "identical": self.identical, "kept": str(self.kept) if self.kept else None,
                "files": [{"path": f.path, "state": f.state, "published": f.published, "rebuilt": f.rebuilt}
                          for f in self.files]}


def reproduce(request: str, *, hub: str | None, variant: str | None, source: str | None, python: str,
              store: ToolchainStore, cuda_home: str | None, cxx: str, probe_dir: Path, reporter: Reporter,
              keep: bool = False) -> Reproduction:
    with reporter.phase(f"fetching {request}"):
        published = _published(request, hub, variant)
    recorded = read_record(published, request)
    work = Path(tempfile.mkdtemp(prefix="kbuild-reproduce-"))
    try:
        with reporter.phase(f"checking out commit {recorded.commit[:12]}"):
            kernel, rel = checkout(_source(source), recorded, request, work / "source")
        notes: list[str] = []
        env = {}
        if recorded.toolchain is not None:
            with reporter.phase("finding the recorded toolchain"):
                python = _torch_python(recorded.toolchain, python, store, probe_dir, notes)
                env.update(_toolkit_env(recorded.toolchain, store, cuda_home, probe_dir))
                _compare_tools(recorded.toolchain, cxx, notes)
            env["SOURCE_DATE_EPOCH"] = recorded.toolchain.get("source-date-epoch") or "0"
        with reporter.phase(f"rebuilding {recorded.variant}"):
            rebuilt = _rebuild(kernel, recorded, python, env, work)
        result = Reproduction(request, recorded, rel, notes, compare(published, rebuilt))
        if keep:
            result.kept = Path(tempfile.mkdtemp(prefix="kbuild-reproduced-")) / recorded.variant
            shutil.copytree(rebuilt, result.kept)
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _published(request: str, hub: str | None, variant: str | None) -> Path:
    """The published variant's folder in kbuild's cache, verified against its digests (the
    loader's choice for this machine unless `variant` names one; GPU archs are not judged)."""
    try:
        return install_kernel(request, hub=hub, variant=variant, check_arch=False)
    except KernelError as e:
        raise KbuildError(f"{request}: {str(e).splitlines()[0]}") from None


def read_record(folder: Path, request: str) -> Recorded:
    """The provenance of the variant at `folder`; a one-line error when it has none kbuild can rebuild from."""
    where = f"{request} {folder.name}"
    try:
        metadata = json.loads((folder / "metadata.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise KbuildError(f"{where}: no readable metadata.json ({e}): nothing records how it was built") from None
    provenance = metadata.get("provenance") or {}
    builder = (provenance.get("kernel-builder") or {}).get("name")
    if builder != "kbuild":
        raise KbuildError(f"{where} was not built by kbuild (its provenance names {builder or 'no builder'}): "
                          "kbuild reproduces only what it built")
    kernel = provenance.get("kernel") or {}
    if not kernel.get("commit") or not kernel.get("tree") or kernel.get("dirty"):
        raise KbuildError(f"{where} records no clean commit of its sources (kernel: {kernel or 'none'}): "
                          "it was built outside git or from uncommitted changes")
    backend = metadata.get("backend") or {}
    compiled = any(folder.rglob("*.so"))
    toolchain = provenance.get("toolchain")
    if compiled and not toolchain:
        raise KbuildError(f"{where} records no toolchain (provenance.toolchain): it was built by a kbuild from "
                          "before toolchains were recorded; rebuild and publish it again first")
    return Recorded(folder.name, kernel["commit"], kernel["tree"], toolchain if compiled else None,
                    tuple(backend.get("archs") or ()), bool(backend.get("archs-partial")))


def _source(source: str | None) -> str:
    """--source, else the git repository the working folder is in."""
    if source:
        return source
    try:
        return proc.run(["git", "rev-parse", "--show-toplevel"], timeout=60, what="git").stdout.strip()
    except CommandError:
        raise UsageError("kbuild reproduce: the working folder is not in a git repository; pass --source "
                         "PATH_OR_GIT_URL (the kernel's repository)") from None


def checkout(source: str, recorded: Recorded, request: str, dest: Path) -> tuple[Path, str]:
    """The recorded commit of `source`, checked out at `dest`; (the kernel folder, its path in the
    repository), the folder being the one whose tree id the variant records."""
    try:
        proc.run(["git", "clone", "--quiet", "--no-checkout", source, str(dest)], timeout=600, what="git clone")
    except CommandError as e:
        why = (e.output_tail.strip().splitlines() or [str(e)])[-1]
        raise UsageError(f"--source {source}: cannot clone it: {why}") from None
    try:
        proc.run(["git", "-C", str(dest), "checkout", "--quiet", "--detach", recorded.commit], timeout=600,
                 what="git checkout")
    except CommandError:
        raise UsageError(f"--source {source} does not hold commit {recorded.commit[:12]}, which {request} "
                         f"{recorded.variant} was built from; pass the kernel's repository") from None
    if proc.run(["git", "-C", str(dest), "rev-parse", "HEAD^{tree}"], timeout=60, what="git").stdout.strip() \
            == recorded.tree:
        return dest, "."
    listing = proc.run(["git", "-C", str(dest), "ls-tree", "-r", "-d", "HEAD"], timeout=60, what="git ls-tree").stdout
    for line in listing.splitlines():
        meta, _, path = line.partition("\t")
        if meta.split()[-1] == recorded.tree:
            return dest / path, path
    raise UsageError(f"commit {recorded.commit[:12]} of {source} has no folder with the sources' tree "
                     f"{recorded.tree[:12]} that {request} {recorded.variant} records")


def _torch_python(record: dict, python: str, store: ToolchainStore, probe_dir: Path, notes: list[str]) -> str:
    """An interpreter with the recorded torch: `python`'s, else one the toolchain store installs."""
    wanted = (record.get("torch") or {}).get("version")
    here = probe_torch(python, probe_dir)
    if wanted and here.torch_version != wanted:
        release, _, local = wanted.partition("+")
        try:
            python = store.torch_python(release, "cuda" if local.startswith("cu") else None)
        except KbuildError as e:
            raise ToolchainError(f"the variant was built with torch {wanted}; {python} has torch "
                                 f"{here.torch_version} and the toolchain store could not install {wanted}: "
                                 f"{e}") from None
        here = probe_torch(python, probe_dir)
        if here.torch_version != wanted:
            raise ToolchainError(f"the variant was built with torch {wanted}; the toolchain store installs "
                                 f"{here.torch_version} for it: pass --python with an environment holding {wanted}")
    files = (record.get("torch") or {}).get("files-sha256")
    if files and here.files_sha256 and files != here.files_sha256:
        notes.append(f"torch {wanted} here is another build of that release (files sha256 {here.files_sha256[:12]}, "
                     f"recorded {files[:12]})")
    return python


def _toolkit_env(record: dict, store: ToolchainStore, cuda_home: str | None, probe_dir: Path) -> dict[str, str]:
    """The environment that gives the rebuild each recorded toolkit (CUDA_HOME of the recorded
    nvcc build): each backend's own rule, with its versions.toml table for the store."""
    env: dict[str, str] = {}
    for backend in BACKENDS.values():
        if backend.needs_toolkit:
            rows = load_versions_table().get(backend.toolkit_table, {})
            env.update(backend.rebuild_env(record, rows, store, cuda_home, probe_dir))
    return env


def _compare_tools(record: dict, cxx: str, notes: list[str]) -> None:
    """Tools kbuild cannot install: a different one is said, and the rebuild goes on (the files decide)."""
    for name, here in (("cxx", compiler(cxx)), ("ninja", ninja_version())):
        if record.get(name) and record[name] != here:
            notes.append(f"{name}: recorded {record[name]!r}, here {here!r}")


def _rebuild(kernel: Path, recorded: Recorded, python: str, env: dict[str, str], work: Path) -> Path:
    command = [sys.executable, "-m", "builder.commands.main", "build", str(kernel), "--variant", recorded.variant,
               "--python", python]
    toolchain = recorded.toolchain or {}
    if recorded.partial:
        command += ["--cuda-archs", ";".join(recorded.archs)]
    if toolchain.get("manylinux"):
        command += ["--manylinux", toolchain["manylinux"]]
        if toolchain.get("sysroot") is None:
            command.append("--no-sysroot")
    log = work / "build.log"
    code = proc.run_logged(command, log, cwd=work, env=env, timeout=6 * 3600)
    rebuilt = kernel / "build" / recorded.variant
    if code != 0 or not rebuilt.is_dir():
        tail = proc.tail(log.read_text(errors="replace"), 3).strip().replace("\n", " | ")
        raise BuildError(f"the rebuild of {recorded.variant} failed ({tail})")
    return rebuilt


def compare(published: Path, rebuilt: Path) -> list[FileRow]:
    """Every file of either folder by its sha256, sorted by path."""
    ours, theirs = _digests(published), _digests(rebuilt)
    rows = []
    for path in sorted(set(ours) | set(theirs)):
        a, b = ours.get(path), theirs.get(path)
        state = "missing" if b is None else "extra" if a is None else "same" if a == b else "differs"
        rows.append(FileRow(path, state, a, b))
    return rows


def _digests(folder: Path) -> dict[str, str]:
    # the files of a variant by kbuild's one rule (kbuild/digest.py: metadata.json in, bytecode out), less
    # the signatures a publish adds over metadata.json: a rebuild has none, and they vouch for no byte of it
    return {rel: hashlib.sha256(path.read_bytes()).hexdigest() for rel, path in variant_files(folder).items()
            if rel not in SIGNATURES}
