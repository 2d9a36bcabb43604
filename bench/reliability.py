"""The trust campaign of issue 10, rerun: each probe attacks the real publisher, server or loader
(`kbuild publish`, `kbuild hub serve` on 127.0.0.1, `get_kernel`) and reports its outcome per
attempt. A probe holds when every attempt ends in the safe outcome.

    python bench/reliability.py [--attempts N] [--out FILE.json]

Prints one row per probe (attempts, outcomes, held or not) and writes them as JSON.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from hubserver import TOKEN, ServerThread  # noqa: E402
from runtime_hubs import Kernel, new_process  # noqa: E402

import kbuild  # noqa: E402
from kbuild import get_kernel, install_kernel  # noqa: E402


def kbuild_cli(*args: str, env: dict | None = None) -> tuple[int, str]:
    done = subprocess.run([sys.executable, "-m", "builder.commands.main", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    return done.returncode, done.stdout + done.stderr


def outcome(error: BaseException | None, safe: str) -> str:
    return safe if error is None else f"{type(error).__name__}"


class World:
    """A built tiny kernel, a local hub with it on v1, and a private cache, in a fresh folder."""

    def __init__(self, root: Path):
        self.root = root
        os.environ.update(KBUILD_CACHE=str(root / "cache"), XDG_CONFIG_HOME=str(root / "config"),
                          HF_HOME=str(root / "hf-home"))
        for name in ("KBUILD_HUB", "HF_ENDPOINT", "KBUILD_OFFLINE", "HF_HUB_OFFLINE", "KBUILD_TRUSTED_ORGS"):
            os.environ.pop(name, None)
        self.kernel = Kernel(root / "tiny").write().build()
        self.hub = root / "hub"
        new_process()


# -- the probes: each returns its outcome; SAFE names the outcome that means it held -------------

def probe_publish_symlink(world: World) -> str:
    secret = world.root / "secret"
    secret.write_text("s3cr3t\n")
    os.symlink(secret, world.kernel.variant("torch-cpu") / "notes.txt")
    code, line = kbuild_cli("publish", str(world.kernel.root), "--hub", str(world.hub))
    return "refused" if code and "symbolic link" in line else f"exit {code}"


def probe_publish_edited(world: World) -> str:
    ops = world.kernel.variant("torch-cpu") / "_ops.py"
    st = ops.stat()
    ops.write_text(ops.read_text().replace("o", "0", 1))
    os.utime(ops, ns=(st.st_atime_ns, st.st_mtime_ns))
    code, line = kbuild_cli("publish", str(world.kernel.root), "--hub", str(world.hub))
    return "refused" if code and "changed since the build" in line else f"exit {code}"


def _cached(world: World) -> Path:
    world.kernel.publish(world.hub)
    return install_kernel("org/tiny@v1", hub=str(world.hub))


def _load_after(world: World) -> str:
    new_process()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = get_kernel("org/tiny@v1", hub=str(world.hub))
        except Exception as e:  # noqa: BLE001 - the outcome is the exception's kind
            return f"refused ({type(e).__name__})"
    tampered = "injected" in Path(module.__file__).with_name("_ops.py").read_text() or module.double(1) != 2
    if tampered:
        return "tampered code loaded"
    return "re-fetched" if any("fetched it again" in str(w.message) for w in caught) else "loaded unchanged"


def probe_cache_same_size_edit(world: World) -> str:
    path = _cached(world)
    ops = path / "_ops.py"
    st, text = ops.stat(), ops.read_text()
    ops.write_text(text[:-len("# injected\n")] + "# injected\n" if len(text) > 12 else text)
    os.utime(ops, ns=(st.st_atime_ns, st.st_mtime_ns))
    return _load_after(world)


def probe_cache_planted_pyc(world: World) -> str:
    import importlib.util
    import py_compile

    path = _cached(world)
    init = path / "__init__.py"
    evil = world.root / "evil.py"
    text = init.read_text()
    evil.write_text(text.replace("return x * 2", "return x * 3"))  # same size: the .pyc header matches
    st = init.stat()
    os.utime(evil, ns=(st.st_atime_ns, st.st_mtime_ns))
    py_compile.compile(str(evil), cfile=importlib.util.cache_from_source(str(init)), doraise=True)
    return _load_after(world)


def probe_cache_forged_record(world: World) -> str:
    from kbuild.digest import digest_tree

    path = _cached(world)
    ops = path / "_ops.py"
    ops.write_text(ops.read_text() + "import os  # injected\n")
    meta = json.loads((path / "metadata.json").read_text())
    meta["digest"]["files"]["_ops.py"] = digest_tree(path)["_ops.py"]
    (path / "metadata.json").write_text(json.dumps(meta))
    path.with_name(path.name + ".verified").unlink()
    return _load_after(world)


def probe_trust_by_org_name(world: World) -> str:
    server = ServerThread(world.root / "served")
    try:
        name = "kernels-community/tiny"
        world.kernel.repo_id = name
        os.environ["HF_TOKEN"] = TOKEN
        world.kernel.write().build().publish(server.url, "--repo-id", name)
        os.environ.pop("HF_TOKEN")
        try:
            get_kernel(f"{name}@v1", hub=server.url)
        except ValueError:
            return "refused"
        return "loaded without trust_remote_code"
    finally:
        server.stop()


def probe_idle_connections(world: World) -> str:
    server = ServerThread(world.root / "served", header_timeout=1.0, max_connections=200)
    try:
        idle = []
        for _ in range(400):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            s.sendall(b"GET / HTTP/1.1\r\n")
            idle.append(s)
        time.sleep(1.5)
        status = server.raw("GET", "/api/whoami-v2")[0]
        for s in idle:
            s.close()
        return "served" if status in (200, 401) else f"status {status}"
    finally:
        server.stop()


def probe_parallel_publish(world: World, n: int = 8) -> str:
    from kbuild.digest import digest_tree

    names = []
    for i in range(n):
        target = world.kernel.variant(f"torch-slice{i}")
        shutil.copytree(world.kernel.variant("torch-cuda"), target)
        (target / "slice.py").write_text(f"S = {i}\n")
        meta = json.loads((target / "metadata.json").read_text())
        meta["digest"]["files"] = digest_tree(target)
        (target / "metadata.json").write_text(json.dumps(meta))
        names.append(target.name)
    procs = [subprocess.Popen([sys.executable, "-m", "builder.commands.main", "publish", str(world.kernel.root), "--hub",
                               str(world.hub), "--variant", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for name in names]
    failed = sum(p.wait() != 0 for p in procs)
    return "all landed" if not failed else f"{failed} of {n} failed"


def probe_read_only_cache(world: World) -> str:
    _cached(world)
    get_kernel("org/tiny@v1", hub=str(world.hub))
    cache = Path(os.environ["KBUILD_CACHE"])
    view = world.root / "ro"
    view.mkdir()
    if subprocess.run(["mount", "--bind", str(cache), str(view)], capture_output=True).returncode:
        return "not run (no bind mount)"
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        os.environ["KBUILD_CACHE"] = str(view)
        new_process()
        try:
            get_kernel("org/tiny@v1", hub=str(world.hub))
        except OSError as e:
            return f"failed ({e.strerror or type(e).__name__})"
        return "loaded"
    finally:
        subprocess.run(["umount", str(view)], check=False)


PROBES = {  # name -> (probe, the outcome that means it held)
    "publish: a link to a secret in a variant": (probe_publish_symlink, "refused"),
    "publish: a same-size, mtime-restored edit after the build": (probe_publish_edited, "refused"),
    "cache: a same-size, mtime-restored edit": (probe_cache_same_size_edit, "re-fetched"),
    "cache: a planted __pycache__ .pyc": (probe_cache_planted_pyc, "loaded unchanged"),
    "cache: a forged digest and a removed record": (probe_cache_forged_record, "re-fetched"),
    "trust: kernels-community on a non-official hub": (probe_trust_by_org_name, "refused"),
    "serve: 400 half-sent connections, then a real request": (probe_idle_connections, "served"),
    "publish: 8 slices at once to one branch": (probe_parallel_publish, "all landed"),
    "loader: a read-only populated cache, @v1": (probe_read_only_cache, "loaded"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for name, (probe, safe) in PROBES.items():
        outcomes = collections.Counter()
        start = time.monotonic()
        for _ in range(args.attempts):
            with tempfile.TemporaryDirectory(prefix="kbuild-reliability-") as tmp:
                try:
                    outcomes[probe(World(Path(tmp)))] += 1
                except Exception as e:  # noqa: BLE001 - a probe that breaks is an outcome too
                    outcomes[f"probe error: {type(e).__name__}: {str(e)[:80]}"] += 1
        held = set(outcomes) == {safe}
        rows.append({"probe": name, "attempts": args.attempts, "outcomes": dict(outcomes), "safe": safe, "held": held,
                     "seconds": round(time.monotonic() - start, 1)})
        print(f"{'held ' if held else 'FAILS'} {name}: {dict(outcomes)}", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"kbuild": kbuild.__version__, "probes": rows}, indent=2) + "\n")
    sys.exit(0 if all(r["held"] for r in rows) else 1)


if __name__ == "__main__":
    main()
