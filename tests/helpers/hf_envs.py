"""The Hugging Face environments the HF-compatibility tests run in: one venv per `kernels` release,
each with the transformers release that pins it, on torch 2.13.0's CPU build (Hugging Face's loader
takes a CUDA variant on any CUDA build of torch, GPU or not, so .venv's torch cannot test its CPU
paths).
`cuda_torch_overlay` puts .venv's CUDA build of torch in front of one for a single process, for the
tests of their CUDA paths.

They live in `.venv/hf-envs/<name>`, so they go with .venv: made once (ci/setup.sh runs this file,
a test session makes any that are missing) and remade only when a pin below changes. All of them
use one copy of torch's own files, `.venv/hf-envs/_torch` (a .pth file in each puts it on the path;
pip there sees torch installed and adds only its dependencies): 0.75 GB once instead of per release,
which matters on a CI disk that other jobs share.
`torch-2.15` (OWN_TORCH) is the exception: torch 2.15.0's own install, for test_newest_torch.py.

CI's disk is shared with other jobs, so what they take is kept down: pip keeps no cache of what it
downloads; an environment with a torch of its own is installed a requirement at a time (pip holds a
call's downloads until it ends: one call for torch 2.15 needed its 2.6 GB of wheels beside the 5.4 GB
they unpack to) and without triton (LEFT_OUT); and after each install, the environment's files
identical to ones of .venv or of another environment become hard links to them
(link_identical_files): the same nvidia-* libraries, sympy, numpy, transformers' unchanged files.

    python tests/helpers/hf_envs.py [NAME ...]     # make or update them (all by default)
"""

from __future__ import annotations

import filecmp
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / ".venv" / "hf-envs"
TORCH_RELEASE = "2.13.0"
TORCH = f"torch=={TORCH_RELEASE}"
# Its CPU build, never pip's default torch, which PyPI serves as a CUDA build: from the pip
# configuration's own local sources first (--no-index: a find-links folder such as CI's), else from
# PyTorch's CPU index (another with KBUILD_TEST_TORCH_CPU_INDEX); kept in CPU_WHEELS with .venv.
CPU_INDEX = os.environ.get("KBUILD_TEST_TORCH_CPU_INDEX", "https://download.pytorch.org/whl/cpu")
CPU_WHEELS = ROOT / ".venv" / "torch-cpu-wheels"

# transformers pins `kernels` by release (its `kernels` extra): 5.17 takes 0.16.x, which needs the
# separate kernels-data package; 5.21 takes 0.17.x; 5.23 and 5.24 take 0.18.x (5.24.0, the newest);
# 5.25 requires kernels>=0.19.1 outright and huggingface_hub>=2.4.0, which pip resolves from it.
PAIRS: dict[str, tuple[str, ...]] = {
    "kernels-0.16": ("kernels==0.16.2", "kernels-data==0.16.2", "transformers==5.17.0"),
    "kernels-0.17": ("kernels==0.17.2", "transformers==5.21.1"),
    "kernels-0.18": ("kernels==0.18.3", "transformers==5.24.0"),
    "kernels-0.19": ("kernels==0.19.1", "transformers==5.25.0", "huggingface_hub>=2.4.0"),
}

# `nox -s canary` adds the newest kernels and transformers the index has, as exact releases
# ("kernels==0.20.0 transformers==5.26.0"): every test over these environments runs on them too, last
if os.environ.get("KBUILD_HF_NEWEST"):
    PAIRS["kernels-newest"] = tuple(os.environ["KBUILD_HF_NEWEST"].split())

# Environments with a torch of their own instead of SHARED_TORCH, installed with an empty pip
# constraints file (PIP_CONSTRAINT) for them alone, so a machine's cap on torch does not hold them back.
# torch-2.15: PyPI's default torch 2.15.0 wheel (+cu132, with its nvidia-* libraries: 2.6 GB to
# download, 5.5 GB installed) and kernels 0.19.1, what tests/integration/test_newest_torch.py builds
# with and loads in, in CI. Pinned, so an upstream release cannot turn CI red; `nox -s canary` runs the
# same file on the newest torch and kernels instead (KBUILD_NEWEST_TORCH_PYTHON).
OWN_TORCH: dict[str, tuple[str, ...]] = {
    "torch-2.15": ("torch==2.15.0", "kernels==0.19.1", "numpy"),
}
NAMES = (*PAIRS, *OWN_TORCH)  # what `python tests/helpers/hf_envs.py` makes
# torch's requirements an OWN_TORCH environment goes without: triton is torch's compiler of GPU kernels
# (1 GB installed), which torch imports only to compile for a GPU; test_newest_torch.py builds and loads
# CPU variants, with no GPU to compile for.
LEFT_OUT = frozenset({"triton"})
# .venv's packages, which an environment's identical files are linked to
MAIN_SITE = next((ROOT / ".venv" / "lib").glob("python*/site-packages"), None)


class EnvError(RuntimeError):
    """An environment could not be made (pip's tail in the message)."""


def client_env(endpoint: str, home) -> dict[str, str]:
    """The environment a Hugging Face client runs in for a test: this one without any HF, kernels or
    transformers setting of the caller's, talking to `endpoint` with a fresh cache under `home`."""
    import os

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING", "KERNELS_", "TRANSFORMERS_")) and k != "USE_HUB_KERNELS"}
    # No HF_HUB_DISABLE_TELEMETRY: with it kernels 0.17.2 sends a User-Agent ending in "; ", which
    # httpx refuses before any request leaves.
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_PROGRESS_BARS="1")
    return env


def cuda_torch_overlay(name: str, dest: Path) -> Path:
    """`dest`, made a folder of links to what `pip install` of .venv's torch (2.14.1, the CUDA 13.0
    build) would add to or replace in environment `name`: torch's requirement closure as .venv holds
    it (extras' requirements followed, markers judged here), less the distributions the environment
    already has at the same version. For the kernels-* environments that is torch, torchgen,
    functorch, triton, the nvidia-* CUDA libraries, cuda-bindings and cuda-pathfinder, each with its
    .dist-info (sympy, networkx, jinja2, ... are there at .venv's versions). On PYTHONPATH it stands
    in front of the environment's site-packages, so `import torch` (and importlib.metadata's
    "torch") is the CUDA build, its libraries load from the links, and everything else (kernels,
    huggingface_hub, sympy, ...) is still the environment's own.

    Hugging Face's loader reads the torch it imports (torch.__version__, torch.version.cuda,
    torch.compiled_with_cxx11_abi()), never torch's install metadata, so this is what a CUDA torch
    installed into the environment would show it, without a second several-GB copy per release."""
    (site,) = (HOME / name / "lib").glob("python*/site-packages")
    return torch_overlay(site, dest, name)


def torch_overlay(theirs_site: Path, dest: Path, name: str) -> Path:
    """`dest`, made a folder of links to what `pip install` of .venv's torch would add to or replace
    in the environment whose site-packages is `theirs_site` (`name` in errors): cuda_torch_overlay's,
    for any venv of this Python. `nox -s wheel` puts one on its venv's path (a .pth file), so the
    wheel is checked with .venv's torch instead of a 5.4 GB copy of it."""
    import importlib.metadata as md
    import os

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    ours_site = Path(md.distribution("torch").locate_file("")).resolve()
    tag = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if theirs_site.parent.name != tag:  # torch's compiled modules are for this Python
        raise EnvError(f"{name} runs {theirs_site.parent.name}, .venv's torch is built for {tag}")
    ours = {canonicalize_name(d.metadata["Name"]): d for d in md.distributions(path=[str(ours_site)])}
    theirs = {canonicalize_name(d.metadata["Name"]): d for d in md.distributions(path=[str(theirs_site)])}
    closure: dict[str, md.Distribution] = {}
    todo, seen = [("torch", frozenset())], set()
    while todo:
        dist, extras = todo.pop()
        if (dist, extras) in seen:
            continue
        seen.add((dist, extras))
        if dist not in ours:
            raise EnvError(f"torch needs {dist}, which {ours_site} lacks")
        closure[dist] = ours[dist]
        for line in ours[dist].requires or ():
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras or {""}):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    added = [d for d, dist in closure.items() if d not in theirs or theirs[d].version != dist.version]

    def tops(dists) -> set[str]:  # their top-level entries; '..' ones are scripts outside site-packages
        return {f.parts[0] for dist in dists for f in dist.files or () if f.parts[0] != ".."}

    links = tops(closure[d] for d in added)
    # what the environment has under those names must be the replaced releases' own (torch 2.13's
    # torch/, say): a namespace folder of another distribution (nvidia/, cuda/) would merge two installs
    shared = links & {p.name for p in theirs_site.iterdir()}
    mixed = shared - tops(theirs[d] for d in added if d in theirs)
    if mixed:
        raise EnvError(f"{name} already has {', '.join(sorted(mixed))}: an overlay would mix two installs")
    dest.mkdir(parents=True, exist_ok=True)
    for top in sorted(links):
        os.symlink(ours_site / top, dest / top)
    return dest


SHARED_TORCH = HOME / "_torch"  # torch's files alone (no dependencies), on every environment's path
_PTH = "kbuild-shared-torch.pth"


def requirements(name: str) -> tuple[str, ...]:
    return OWN_TORCH[name] if name in OWN_TORCH else (TORCH, *PAIRS[name])


def python(name: str) -> Path:
    return HOME / name / "bin" / "python"


def _pins(name: str) -> str:
    """What an environment's kbuild-pins.txt holds once it is made: its requirements and where its
    torch comes from (an environment made with a torch of its own is remade)."""
    source = (f"torch of its own without {' '.join(sorted(LEFT_OUT))}" if name in OWN_TORCH
              else f"{TORCH} from {SHARED_TORCH.name}")
    return "\n".join((*requirements(name), source)) + "\n"


def up_to_date(name: str) -> bool:
    stamp = HOME / name / "kbuild-pins.txt"
    return stamp.is_file() and stamp.read_text() == _pins(name) and python(name).is_file() \
        and (name in OWN_TORCH or (SHARED_TORCH / "kbuild-pins.txt").is_file())


def _pip(python_exe, args: list[str], what: str, env: dict[str, str] | None = None) -> None:
    pip = subprocess.run([str(python_exe), "-m", "pip", "install", "-q", "--no-cache-dir", *args],
                         capture_output=True, text=True, env=env)
    if pip.returncode != 0:
        tail = (pip.stdout + pip.stderr).strip().splitlines()[-15:]
        raise EnvError(f"pip install {' '.join(a for a in args if not a.startswith('-'))} into {what} failed:\n"
                       + "\n".join(tail))


def link_identical_files(target: Path, references: list[Path]) -> int:
    """Files of `target` of 16 KiB and over (where the space is) that are byte for byte a file of
    `references` or an earlier one of `target`, with the same mode, become hard links to it; the bytes
    that saves. Nothing outside `target` changes: a linked file takes the other's time stamp, and
    .venv's torch headers keep theirs, which ninja compares to tell a build up to date. pip never
    writes into an installed file (it removes and writes anew), so an install or removal in one
    environment leaves the others as they were."""
    by_size: dict[int, list[tuple[str, os.stat_result]]] = {}

    def files(root: Path):
        for folder, _, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode) and st.st_size >= 16 * 1024:
                    yield path, st

    for root in references:
        for path, st in files(root):
            by_size.setdefault(st.st_size, []).append((path, st))
    saved = 0
    for path, st in files(target):
        same = by_size.setdefault(st.st_size, [])
        # the same file name first: a library or header of another release of the same package
        for ref, ref_st in sorted(same, key=lambda c: os.path.basename(c[0]) != os.path.basename(path)):
            if (ref_st.st_dev, ref_st.st_ino) == (st.st_dev, st.st_ino):
                break  # already one
            if (ref_st.st_dev == st.st_dev and stat.S_IMODE(ref_st.st_mode) == stat.S_IMODE(st.st_mode)
                    and filecmp.cmp(ref, path, shallow=False)):
                os.link(ref, path + ".kbuild-link")
                os.replace(path + ".kbuild-link", path)
                saved += st.st_size
                break
        else:
            same.append((path, st))
    return saved


def _references(name: str) -> list[Path]:
    """What environment `name`'s files are linked to: .venv's packages and the other environments."""
    return ([MAIN_SITE] if MAIN_SITE else []) + [p for p in sorted(HOME.iterdir())
                                                 if p.is_dir() and p.name != name]


def _install_own_torch(name: str, env: dict[str, str]) -> None:
    """An OWN_TORCH environment's requirements, torch first without its dependencies, then each of
    torch's requirements but LEFT_OUT's (an extra at a time), then the rest, one pip call each: what
    pip downloads is held only for the call, and each call's files are linked to identical ones
    before the next."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    py, what = python(name), str(HOME / name)
    torch_pin, *rest = requirements(name)
    _pip(py, ["--no-deps", torch_pin], what, env)
    link_identical_files(HOME / name, _references(name))
    (site,) = (HOME / name / "lib").glob("python*/site-packages")
    (torch,) = md.distributions(name="torch", path=[str(site)])
    for line in torch.requires or ():
        req = Requirement(line)
        # markers judged here: the environment is a venv of this interpreter
        if canonicalize_name(req.name) in LEFT_OUT or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        # an extra at a time: cuda-toolkit[cublas,cudart,...] is ten CUDA libraries' wheels
        for extra in sorted(req.extras) or [None]:
            _pip(py, [f"{req.name}{f'[{extra}]' if extra else ''}{req.specifier}"], what, env)
            link_identical_files(HOME / name, _references(name))
    _pip(py, rest, what, env)


def cpu_torch_wheel(release: str = TORCH_RELEASE) -> Path:
    """torch `release`'s CPU build as a wheel file in CPU_WHEELS, downloaded first when missing."""
    CPU_WHEELS.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CPU_WHEELS / ".lock")):
        pattern = f"torch-{release}+cpu-*.whl"
        tried = []
        for where, source in (("the pip configuration's local sources", ["--no-index"]),
                              (CPU_INDEX, ["--index-url", CPU_INDEX])):
            if sorted(CPU_WHEELS.glob(pattern)):
                break
            pip = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                                  *source, f"torch=={release}+cpu", "-d", str(CPU_WHEELS)],
                                 capture_output=True, text=True)
            lines = (pip.stdout + pip.stderr).strip().splitlines() or ["no output"]
            tried.append(f"{where}: " + next((line for line in lines if line.startswith("ERROR:")), lines[-1]))
        wheels = sorted(CPU_WHEELS.glob(pattern))
        if not wheels:
            raise EnvError(f"torch {release}'s CPU build (torch=={release}+cpu) was found nowhere; "
                           + "; ".join(tried) + " (set KBUILD_TEST_TORCH_CPU_INDEX to an index that has it)")
        return wheels[-1]


def _shared_torch() -> Path:
    """SHARED_TORCH, installed first when missing: torch's wheel unpacked with `--no-deps`, so each
    environment gets torch's dependencies at the versions its own resolution picks."""
    stamp = SHARED_TORCH / "kbuild-pins.txt"
    with FileLock(str(HOME / "_torch.lock")):
        if not (stamp.is_file() and stamp.read_text() == TORCH + "+cpu\n"):
            shutil.rmtree(SHARED_TORCH, ignore_errors=True)
            _pip(sys.executable, ["--no-deps", "--target", str(SHARED_TORCH), str(cpu_torch_wheel())],
                 str(SHARED_TORCH))
            link_identical_files(SHARED_TORCH, _references(SHARED_TORCH.name))
            stamp.write_text(TORCH + "+cpu\n")  # last: a killed install is redone next time
    return SHARED_TORCH


def ensure(name: str) -> Path:
    """The environment's python, made or remade first when its pins changed."""
    if name not in NAMES:
        raise EnvError(f"unknown environment {name!r}: expected one of {', '.join(NAMES)}")
    venv = HOME / name
    HOME.mkdir(parents=True, exist_ok=True)
    shared = None if name in OWN_TORCH else _shared_torch()
    # parallel sessions (or setup.sh and a test run) must not pip into one venv at once
    with FileLock(str(HOME / f"{name}.lock")):
        if up_to_date(name):
            return python(name)
        shutil.rmtree(venv, ignore_errors=True)  # a half-made or outdated one: pip would keep its leftovers
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = None
        if shared is None:  # its own torch, past this machine's pip constraints (/etc/xdg/pip/constraints.txt)
            empty = venv / "no-constraints.txt"
            empty.write_text("")
            env = {**os.environ, "PIP_CONSTRAINT": str(empty)}
        else:
            (site,) = (venv / "lib").glob("python*/site-packages")
            # after site-packages on sys.path: what the environment installs itself, and an overlay on
            # PYTHONPATH (cuda_torch_overlay), both come first
            (site / _PTH).write_text(f"{shared}\n")
        if env is None:
            _pip(python(name), list(requirements(name)), str(venv))
        else:
            _install_own_torch(name, env)
        link_identical_files(venv, _references(name))
        (venv / "kbuild-pins.txt").write_text(_pins(name))  # last: a killed install is remade next time
    return python(name)


def main(argv: list[str]) -> int:
    for name in argv or list(NAMES):
        started = time.monotonic()
        try:
            made = ensure(name)
        except EnvError as e:
            print(f"tests/helpers/hf_envs.py: {e}", file=sys.stderr)
            return 1
        print(f"{name}: {made} ({' '.join(requirements(name))}; {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
