"""Integration: every kind of variant kbuild makes, as Hugging Face's kernels 0.19.1 checks it at
load time (issue 44, item 5: metadata exactly as 0.18+ reads it, and the digest over the served
files), and the zip build layout on both loaders.

Built here with the kernels-0.19 environment's torch (2.13.0 CPU; tests/helpers/hf_envs.py) and
published to a real `kbuild hub serve` on 127.0.0.1 whose organisation is a trusted publisher:

- stable ABI (kernels/activation: torch-stable-abi210-cpu-x86_64-linux), compiled
  (torch213-cxx11-cpu-x86_64-linux), Python-only (torch-cpu) and the zip layout (activation as
  edition 6 with `build-layout = "zip"`: `<id>.zip` with the library beside it) each
  load through `kernels.get_kernel` as a user calls it (no trust_remote_code, kernels' validators
  on), and kernels' digest validator says the files match;
- a CUDA variant (built with .venv's CUDA torch; this host has no GPU and the environment a CPU
  torch) goes through kernels' own metadata parser and digest check;
- on a CUDA build of torch (.venv's, put in front of each environment's own by
  hf_envs.cuda_torch_overlay) kernels 0.16.2, 0.17.2, 0.18.3 and 0.19.1 each pick that CUDA variant
  from a repo that also holds its CPU twin and variants for another torch, CUDA or C++ ABI, then
  fetch and import it (no GPU needed);
- kernels 0.18.3 refuses the zip layout in one line; kbuild's loader loads it from the hub.

The helper that runs inside the environment is tests/helpers/hf_formats_probe.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import hf_envs
from cpu_kernel import write_cpu_cuda_kernel, write_cpu_kernel, write_noarch_kernel
from hubserver import TOKEN, ServerThread
from kbuild.digest import digest_tree

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parents[1] / "helpers" / "hf_formats_probe.py"
ORG = "kb-fmt"
IGNORE = shutil.ignore_patterns("build", ".kbuild", "__pycache__", ".pytest_cache")
CPU_SOURCE = 'extern "C" int kb_compiled_probe(int x) { return x + 1; }\n'
CUDA_SOURCE = "__global__ void kb_cuda_probe(int *x) { *x += 1; }\n"
PACKAGE = "from ._ops import ops\n\n\ndef probe():\n    return 'ran'\n"


def commit(root: Path) -> Path:
    """A fresh git repository of `root`, committed: kbuild names a build after its sources' commit
    and publishes only a clean one."""
    git = ["git", "-C", str(root), "-c", "user.name=kbuild-tests", "-c", "user.email=tests@kbuild.invalid",
           "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "kernel"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=120)
    return root


def kbuild(*args: str, timeout: int = 1800) -> str:
    done = subprocess.run([sys.executable, "-m", "builder.commands.main", *args], capture_output=True, text=True,
                          env={**os.environ, "HF_TOKEN": TOKEN}, timeout=timeout)
    assert done.returncode == 0, (args, done.stdout[-3000:] + done.stderr[-3000:])
    return done.stdout


def only_variant(kernel: Path) -> Path:
    (variant,) = [d for d in (kernel / "build").iterdir() if not d.name.startswith(".")]
    return variant


def as_zip_layout(project: Path) -> Path:
    """The project's manifest as edition 6 with `build-layout = "zip"`: kbuild stages the package as
    `<id>.zip` with the library beside it (builder/stage/zip_layout.py)."""
    toml = (project / "build.toml").read_text()
    toml = toml.replace("edition = 5\n", 'edition = 6\nbuild-layout = "zip"\n')
    toml = toml.replace('backend = "cpu"', 'language = "cpp-cpu"').replace('backend = "cuda"', 'language = "cpp-cuda"')
    (project / "build.toml").write_text(toml)
    return project


@pytest.fixture(scope="module")
def envs() -> dict[str, Path]:
    try:
        return {name: hf_envs.ensure(name) for name in hf_envs.PAIRS}
    except hf_envs.EnvError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = ServerThread(tmp_path_factory.mktemp("hub"), trusted=(ORG,))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def published(envs, hub, tmp_path_factory) -> dict[str, dict]:
    """Each kind built with the 0.19 environment's torch and published: kind -> repo, variant, id, commit."""
    root = tmp_path_factory.mktemp("kernels")
    projects = {
        "stable-abi": shutil.copytree(REPO / "kernels" / "activation", root / "activation", ignore=IGNORE),
        "compiled": write_cpu_kernel(root / "kb-compiled", "kb-compiled", CPU_SOURCE, package=PACKAGE),
        "noarch": write_noarch_kernel(root / "kb-noarch", "kb-noarch", package="def probe():\n    return 'ran'\n"),
        # activation in the zip layout (another manifest, so another tree id and op namespace)
        "zip": as_zip_layout(shutil.copytree(REPO / "kernels" / "activation", root / "activation-zip", ignore=IGNORE)),
    }
    out = {}
    for kind, project in projects.items():
        commit(project)
        kbuild("build", str(project), "--python", str(envs["kernels-0.19"]), "-j", "2")
        variant = only_variant(project)
        repo_id = f"{ORG}/{project.name}"
        summary = json.loads(kbuild("publish", str(project), "--hub", hub.url, "--repo-id", repo_id, "--json"))
        meta = json.loads((variant / "metadata.json").read_text())
        out[kind] = {"repo": repo_id, "variant": variant.name, "id": meta["id"], "name": meta["name"],
                     "commit": summary["commit"], "kbuild_dirty": meta["provenance"]["kernel-builder"].get("dirty")}
    return out


def probe(python: Path, hub: ServerThread, home: Path, *args: str, overlay: Path | None = None) -> dict:
    """`overlay`: a folder put first on the path (PYTHONPATH), hf_envs.cuda_torch_overlay's."""
    env = hf_envs.client_env(hub.url, home)
    if overlay is not None:
        env["PYTHONPATH"] = str(overlay)
    before = len(hub.logged())
    done = subprocess.run([str(python), str(PROBE), *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    report = json.loads(line.removeprefix("PROBE "))
    report["requests"] = hub.logged(before)
    return report


KINDS = ["stable-abi", "compiled", "noarch", "zip"]


@pytest.mark.parametrize("kind", KINDS)
def test_kernels_0_19_loads_each_kind_with_its_validators(kind, envs, hub, published, tmp_path):
    built = published[kind]
    # the zip build by branch name: 0.18+ resolve it through /api/kernels/{repo}/revision/v1
    pin = "v1" if kind == "zip" else "1"
    report = probe(envs["kernels-0.19"], hub, tmp_path / "hf", "load", built["repo"], pin)
    assert "error" not in report, report
    assert report["kernels"] == "0.19.1"
    assert report["module"] == built["id"] and report["metadata"]["id"] == built["id"]
    assert report["metadata"]["name"] == built["name"] and report["metadata"]["version"] == 1
    snapshot = tmp_path / "hf" / "hub" / f"kernels--{built['repo'].replace('/', '--')}" / "snapshots" / built["commit"]
    init = f"{built['id']}.zip/__init__.py" if kind == "zip" else "__init__.py"
    assert report["file"] == str(snapshot / "build" / built["variant"] / init), report
    # kernels' digest validator ran on the downloaded files and found them as metadata.json says
    assert f"DEBUG: Kernel '{built['name']}' variant '{built['variant']}': the files match the digest in the metadata" \
        in report["log"], report["log"]
    # and nothing else to say, but what is true: kernels warns about a build by a kbuild checkout
    # with uncommitted changes (a development tree such as this one may be), as the provenance says
    warnings = [line for line in report["log"] if line.startswith(("WARNING", "ERROR"))]
    dirty = f"WARNING: Kernel '{built['name']}' variant '{built['variant']}' was built from a dirty git tree " \
            "(kernel-builder had uncommitted changes)"
    assert [w[:len(dirty)] for w in warnings] == ([dirty] if built["kbuild_dirty"] else []), report["log"]
    # trusted by the hub's word, not by trust_remote_code
    assert any(r.startswith(f"GET /api/organizations/{ORG}/overview 200") for r in report["requests"]), report["requests"]
    if kind == "zip":
        assert "zip" in report["metadata"]["build_layout"].lower()
        assert any(r.startswith(f"GET /api/kernels/{built['repo']}/revision/v1 200") for r in report["requests"])
    if kind in ("stable-abi", "zip"):
        assert report["max_err"] < 1e-5, report  # the library beside the archive ran
    else:
        assert "probe" in report["names"], report


def test_each_build_has_its_own_id(published):
    assert len({b["id"] for b in published.values()}) == len(published)


def test_kernels_0_18_refuses_the_zip_layout_in_one_line(envs, hub, published, tmp_path):
    report = probe(envs["kernels-0.18"], hub, tmp_path / "hf", "load", published["zip"]["repo"], "1")
    assert report["kernels"] == "0.18.3"
    assert report["error"].startswith("RuntimeError: "), report
    assert "requires kernels>=0.19.0" in report["error"], report


def test_kbuild_loads_the_zip_layout_from_the_hub(hub, published, tmp_path):
    """kbuild's loader, in .venv's torch (2.14, CPU backend): the stable-ABI build fits it."""
    built = published["zip"]
    script = (
        "import json, sys, torch, kbuild\n"
        "k = kbuild.get_kernel(sys.argv[1], hub=sys.argv[2], backend='cpu')\n"
        "x = torch.randn(4, 16)\n"
        "err = (k.silu_and_mul(x) - torch.nn.functional.silu(x[..., :8]) * x[..., 8:]).abs().max().item()\n"
        "print(json.dumps({'name': k.__name__, 'file': k.__file__, 'err': err}))\n"
    )
    # kbuild trusts an organisation by the user's word (KBUILD_TRUSTED_ORGS), not by the hub's (README)
    env = {**os.environ, "KBUILD_CACHE": str(tmp_path / "cache"), "HF_HOME": str(tmp_path / "hf"),
           "KBUILD_TRUSTED_ORGS": f"{ORG}@{hub.url}"}
    done = subprocess.run([sys.executable, "-c", script, f"{built['repo']}@v1", hub.url], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["name"] == built["id"]
    assert got["file"].endswith(f"/{built['variant']}/{built['id']}.zip/__init__.py"), got
    assert got["err"] < 1e-5


@pytest.fixture(scope="module")
def cuda_variant(tmp_path_factory) -> Path:
    """The CUDA build of a project with a CUDA and a CPU section, with .venv's CUDA torch and nvcc
    (no GPU needed); the CPU build (torch214-cxx11-cpu-x86_64-linux) beside it."""
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").is_file():
        pytest.skip("no nvcc")
    project = write_cpu_cuda_kernel(tmp_path_factory.mktemp("cuda") / "kb-cuda", "kb-cuda", CPU_SOURCE, CUDA_SOURCE,
                                    ("9.0",), package=PACKAGE)
    commit(project)
    kbuild("build", str(project), "-j", "2")
    (variant,) = [d for d in (project / "build").iterdir() if "-cu" in d.name]
    return variant


def test_a_cuda_variants_metadata_is_what_kernels_0_19_reads(cuda_variant, envs, hub, tmp_path):
    assert cuda_variant.name.startswith("torch") and "-cu" in cuda_variant.name
    report = probe(envs["kernels-0.19"], hub, tmp_path / "hf", "check", str(cuda_variant))
    meta = json.loads((cuda_variant / "metadata.json").read_text())
    assert (report["id"], report["name"], report["version"]) == (meta["id"], "kb-cuda", 1)
    assert report["digest"] == "Success", report
    assert meta["backend"] == {"type": "cuda", "archs": ["9.0"]}


DECOY_INIT = 'raise ImportError("{name} is a decoy: a loader on this torch must not pick it")\n'


def decoys(cuda: str) -> dict[str, str]:
    """Names beside the CUDA build `cuda` (torchXY-cxx11-cuMm-...) that kernels must reject on the
    torch it was built with, each with the reason kernels (0.16 to 0.19 alike) gives: each shows it
    read one thing from the torch it imported."""
    x, y, major, minor, rest = re.fullmatch(r"torch(\d)(\d+)-cxx11-cu(\d+)(\d)-(.+)", cuda).groups()
    x, y, major, minor = int(x), int(y), int(major), int(minor)
    system_cuda = f"is not compatible with system CUDA version ({major}.{minor})"
    return {
        # torch.__version__: the older torch (2.13: the environment's own install)
        f"torch{x}{y - 1}-cxx11-cu{major}{minor}-{rest}":
            f"Torch version ({x}.{y - 1}) does not match environment Torch version ({x}.{y})",
        # torch.version.cuda: kernels prefers the newest CUDA minor it accepts, so this one would win
        f"torch{x}{y}-cxx11-cu{major}{minor + 2}-{rest}": f"CUDA version ({major}.{minor + 2}) {system_cuda}",
        # torch.version.cuda's major
        f"torch{x}{y}-cxx11-cu{major - 1}9-{rest}": f"CUDA version ({major - 1}.9) {system_cuda}",
        # torch.compiled_with_cxx11_abi()
        f"torch{x}{y}-cxx98-cu{major}{minor}-{rest}":
            "Torch CXX11 ABI (False) does not match environment Torch CXX11 ABI (True)",
    }


@pytest.fixture(scope="module")
def cuda_repo(cuda_variant, hub, tmp_path_factory) -> dict:
    """kb-cuda published by `kbuild publish` as one repo: its CUDA and CPU builds, and beside them
    copies of the CUDA build named for another torch, CUDA or C++ ABI (decoys(); building those for
    real would take a torch 2.13 CUDA build and other nvccs). A decoy's __init__.py raises, and its
    digest is its own, so a loader that picked one would fail the import, loudly."""
    project = shutil.copytree(cuda_variant.parents[1], tmp_path_factory.mktemp("cuda-repo") / "kb-cuda",
                              ignore=shutil.ignore_patterns(".kbuild"))
    for name in decoys(cuda_variant.name):
        folder = shutil.copytree(cuda_variant, project / "build" / name)
        (folder / "__init__.py").write_text(DECOY_INIT.format(name=name))
        meta = json.loads((folder / "metadata.json").read_text())
        meta["digest"]["files"] = digest_tree(folder)
        (folder / "metadata.json").write_text(json.dumps(meta, indent=2))
    repo_id = f"{ORG}/kb-cuda"
    summary = json.loads(kbuild("publish", str(project), "--hub", hub.url, "--repo-id", repo_id, "--json"))
    return {"repo": repo_id, "commit": summary["commit"],
            "variants": sorted(p.name for p in (project / "build").iterdir() if not p.name.startswith("."))}


@pytest.mark.parametrize("env", list(hf_envs.PAIRS))
def test_kernels_picks_kbuilds_cuda_variant_on_a_cuda_torch(env, envs, hub, cuda_variant, cuda_repo, tmp_path):
    """Each kernels release, in its own environment with .venv's CUDA torch put in front of that
    environment's CPU one (hf_envs.cuda_torch_overlay: what `pip install` of that torch would change,
    and nothing else), picks kbuild's CUDA variant from the hub and imports it, on a host without a
    GPU as CI's: get_kernel_variants' trace accepts it alone, rejecting the CPU build and each decoy
    for what it read from torch, and get_kernel downloads that variant only and loads its library.
    check_arch=False changes nothing here (kernels skips the arch check without a GPU); it keeps the
    test the same on a GPU host whose capability the build (9.0) lacks."""
    import torch

    overlay = hf_envs.cuda_torch_overlay(env, tmp_path / "overlay")
    report = probe(envs[env], hub, tmp_path / "hf", "pick", cuda_repo["repo"], "1", overlay=overlay)
    assert report["kernels"] == hf_envs.PAIRS[env][0].removeprefix("kernels==")
    # kernels saw .venv's CUDA torch (not the environment's 2.13 CPU one), and everything else is the environment's
    assert report["torch"] == {"version": torch.__version__, "cuda": torch.version.cuda, "cxx11_abi": True,
                               "gpu": False, "file": str(overlay / "torch" / "__init__.py"),
                               "installed": metadata.version("torch")}, report["torch"]
    for module, file in report["origins"].items():
        assert Path(file).is_relative_to(envs[env].parents[1]), (module, file)

    cuda = cuda_variant.name
    cpu = cuda.replace(re.search(r"-cu\d+-", cuda)[0], "-cpu-")
    assert cuda_repo["variants"] == sorted([cuda, cpu, *decoys(cuda)])
    # kernels' own trace: the CUDA build alone accepted (best first), the rest rejected for what it read
    assert report["trace"][0] == {"variant": cuda, "accepted": True, "reason": None}, report["trace"]
    rejected = {d["variant"]: d["reason"] for d in report["trace"][1:] if not d["accepted"]}
    cuda_tag = "cu" + torch.version.cuda.replace(".", "")
    assert rejected == {cpu: f"backend (cpu) does not match selected backend ({cuda_tag})", **decoys(cuda)}, \
        report["trace"]

    # get_kernel fetched the CUDA variant alone and imported it: its package ran, its library loaded
    snapshot = tmp_path / "hf" / "hub" / f"kernels--{cuda_repo['repo'].replace('/', '--')}" / "snapshots" / \
        cuda_repo["commit"] / "build"
    assert sorted(p.name for p in snapshot.iterdir()) == [cuda]
    assert report["file"] == str(snapshot / cuda / "__init__.py"), report
    assert report["module"] == json.loads((cuda_variant / "metadata.json").read_text())["id"]
    assert report["probe"] == "ran"
    (library,) = cuda_variant.glob("*.so")
    assert report["library"] == str(snapshot / cuda / library.name)
    assert report["library_sha256"] == hashlib.sha256(library.read_bytes()).hexdigest()
    others = [r for r in report["requests"] for name in cuda_repo["variants"]
              if name != cuda and f"/build/{name}/" in r]
    assert not others, others  # nor did it read any other variant's files


def test_kernels_variants_and_kbuild_variants_agree(envs, hub, published, tmp_path):
    """`kernels variants --all-versions` (which lists each branch's tree as refs%2Fheads%2Fv1) and
    `kbuild variants` on the same published kernel: the same variants, the same one preferred."""
    repo = published["stable-abi"]["repo"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf"))
    before = len(hub.logged())
    done = subprocess.run([str(envs["kernels-0.19"].parent / "kernels"), "variants", repo, "--all-versions", "--json"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert any(f"/api/kernels/{repo}/tree/refs%2Fheads%2Fv1/build" in r and " 200 " in r
               for r in hub.logged(before)), hub.logged(before)
    (theirs,) = json.loads(done.stdout)["revisions"]
    ours = json.loads(kbuild("variants", repo, "--hub", hub.url, "--backend", "cpu", "--all-versions", "--json"))
    (mine,) = ours["revisions"]
    assert [(v["variant"], v["compatible"], v["preferred"]) for v in theirs["variants"]] == \
        [(v["variant"], v["accepted"], v["loads"]) for v in mine["variants"]]


README_CPU_NOTE = 'backend="cpu"'


def test_on_a_cuda_torch_without_a_gpu_kernels_loads_a_cpu_variant_only_with_backend_cpu(envs, hub, published, tmp_path):
    """README ("Serving the local hub"): Hugging Face's kernels 0.19.1 on a CUDA build of torch (.venv's,
    through hf_envs.cuda_torch_overlay) with no GPU selects the CUDA backend and refuses a repo's CPU
    variant; `backend="cpu"`, as the README says to pass there, loads it."""
    assert README_CPU_NOTE in (REPO / "README.md").read_text()  # the README says so where it shows kernels.get_kernel
    overlay = hf_envs.cuda_torch_overlay("kernels-0.19", tmp_path / "overlay")
    env = {**hf_envs.client_env(hub.url, tmp_path / "hf"), "PYTHONPATH": str(overlay)}
    load = ("import sys, kernels, torch; assert torch.version.cuda and not torch.cuda.is_available(); "
            "k = kernels.get_kernel(sys.argv[1], version=1{}); print('LOADED', k.__name__)")
    repo = published["stable-abi"]["repo"]
    without = subprocess.run([str(envs["kernels-0.19"]), "-c", load.format(""), repo], env=env, capture_output=True,
                             text=True, timeout=600)
    assert without.returncode != 0, without.stdout
    cuda_tag = "cu" + __import__("torch").version.cuda.replace(".", "")
    assert f"backend (cpu) does not match selected backend ({cuda_tag})" in without.stderr, without.stderr[-3000:]
    with_cpu = subprocess.run([str(envs["kernels-0.19"]), "-c", load.format(", backend='cpu'"), repo], env=env,
                              capture_output=True, text=True, timeout=600)
    assert with_cpu.returncode == 0 and "LOADED" in with_cpu.stdout, with_cpu.stdout + with_cpu.stderr[-3000:]
