"""The trust campaign of issue 10, rerun: each probe attacks the real publisher, server or loader
(`kbuild publish`, `kbuild hub serve` on 127.0.0.1, `get_kernel`) and reports its outcome per
attempt. A probe holds when every attempt ends in the safe outcome.

    python bench/reliability.py [--attempts N] [--out FILE.json]

Prints one row per probe (attempts, outcomes, held or not) and writes them as JSON.
"""

from __future__ import annotations

import argparse
import base64
import collections
import hashlib
import http.client
import importlib.util
import json
import os
import py_compile
import random
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "helpers")]

import kbuild  # noqa: E402
from builder.hub import Upload, open_hub, parse_hub  # noqa: E402
from hostile_hub import HostileHub  # noqa: E402
from hubserver import TOKEN, ServerThread  # noqa: E402
from kbuild import get_kernel, get_locked_kernel, install_kernel, load_kernel  # noqa: E402
from kbuild.digest import digest_tree  # noqa: E402
from kbuild.errors import VariantTooLarge  # noqa: E402
from kbuild.hubs.local_git import LocalGitHub  # noqa: E402
from kbuild.lockfile import lock_kernel, write_lock  # noqa: E402
from kbuild.repo_layout import ssh_signature  # noqa: E402
from kbuild.signatures.ssh import SIGNATURE  # noqa: E402
from kbuild_hub.gitstore import FileAdd, GitStore  # noqa: E402
from kbuild_hub.server import ServerConfig, Tokens, build_app, listen  # noqa: E402
from kbuild_hub.server.connections import Limits, uvicorn_config  # noqa: E402
from runtime_hubs import INIT, Kernel, new_process  # noqa: E402


class ProbeMissed(Exception):
    """A probe's set-up no longer reaches the code it aims at (the layout moved under it): its
    outcome would say nothing about kbuild, so the probe fails loudly instead of holding or failing
    for the wrong reason (issue 53 item 5: a forged signature planted where kbuild no longer reads one)."""


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
        for name in ("KBUILD_HUB", "HF_ENDPOINT", "KBUILD_OFFLINE", "HF_HUB_OFFLINE", "KBUILD_TRUSTED_ORGS",
                     "KBUILD_REQUIRE_SIGNATURE", "KBUILD_ALLOWED_SIGNERS", "KBUILD_SIGNATURES", "KBUILD_SIGNING_KEY"):
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
    assert module.__file__ is not None  # a kernel is a package, imported from its __init__.py
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
    names = []
    for i in range(n):
        target = world.kernel.variant(f"torch-slice{i}")
        shutil.copytree(world.kernel.variant("torch-cuda"), target)
        (target / "slice.py").write_text(f"S = {i}\n")
        meta = json.loads((target / "metadata.json").read_text())
        meta["digest"]["files"] = digest_tree(target)
        (target / "metadata.json").write_text(json.dumps(meta))
        names.append(target.name)
    procs = [subprocess.Popen([sys.executable, "-m", "builder.commands.main", "publish", str(world.kernel.root),
                               "--hub", str(world.hub), "--variant", name],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


# -- the server under slow, idle, non-reading and malformed clients (issue 26) ------------------

class _LimitedServer:
    """The real hub app under uvicorn with the given connection limits, a kernel repo `org/big`
    holding one 8 MB file; the abusers connect from 127.0.0.2… so the real client (127.0.0.1)
    is another address."""

    BIG = 8 << 20

    def __init__(self, root: Path, limits=None, **config):
        import uvicorn

        limits = limits or Limits()
        store = GitStore(root)  # without the served limits: the fixture may be larger
        store.create_repo("kernel", "org/big")
        store.commit("kernel", "org/big", "main", add=[FileAdd("big.bin", b"\xab" * self.BIG)], message="big",
                     parent=None)
        self.app = build_app(ServerConfig(root=root, tokens=Tokens((TOKEN,), root / "tokens"), **config))
        sock = listen("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn_config(self.app, limits.header_timeout, limits.max_connections, limits))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)

    def connect(self, source: str = "127.0.0.1", rcvbuf: int | None = None) -> socket.socket:
        s = socket.socket()
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(10)
        s.bind((source, 0))
        s.connect(("127.0.0.1", self.port))
        return s

    def request(self, raw: bytes) -> tuple[int, float]:
        """(status, seconds) of one request on a fresh connection from 127.0.0.1."""
        started = time.monotonic()
        with self.connect() as s:
            s.sendall(raw)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        return int(data.split(b" ", 2)[1]) if data else 0, time.monotonic() - started

    def real_requests(self, n: int = 10) -> str:
        """'served' when each of `n` real requests answers 200 within 1 s."""
        good = 0
        for _ in range(n):
            status, seconds = self.request(b"GET /api/kernels/org/big/refs HTTP/1.1\r\n"
                                           b"Host: x\r\nConnection: close\r\n\r\n")
            good += status == 200 and seconds < 1.0
            time.sleep(0.1)
        return "served" if good == n else f"{good}/{n} served within 1 s"


def _hold(server: _LimitedServer, n: int, start: bytes, rcvbuf: int | None = None) -> list[socket.socket]:
    held = []
    for i in range(n):
        try:
            s = server.connect(f"127.0.0.{2 + i % 20}", rcvbuf)
            if start:
                s.sendall(start)
            held.append(s)
        except OSError:
            pass  # refused by a cap: that is the server holding
    return held


def _served_while_held(world: World, start: bytes, n: int = 600, trickle: bytes = b"",
                       rcvbuf: int | None = None) -> str:
    with _LimitedServer(world.root / "served") as server:
        held = _hold(server, n, start, rcvbuf)
        time.sleep(1.0)
        for s in held if trickle else ():
            try:
                s.sendall(trickle)
            except OSError:
                pass
        try:
            return server.real_requests()
        finally:
            for s in held:
                s.close()


def probe_serve_slow_bodies(world: World) -> str:
    return _served_while_held(world, b"POST /api/validate-yaml HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nx",
                              trickle=b"x")


def probe_serve_idle(world: World) -> str:
    return _served_while_held(world, b"")


def probe_serve_slowloris(world: World) -> str:
    return _served_while_held(world, b"GET /api/whoami-v2 HTTP/1.1\r\nHost: x\r\n", trickle=b"X-a: b\r\n")


def probe_serve_non_reading_downloads(world: World) -> str:
    """100 downloads started and never read: no process each, real requests served, and every
    one of them closed by the send timeout."""
    with _LimitedServer(world.root / "served", Limits(send_timeout=2.0)) as server:
        held = _hold(server, 100, b"GET /kernels/org/big/resolve/main/big.bin HTTP/1.1\r\nHost: x\r\n\r\n", 4096)
        time.sleep(1.0)
        children = sum(len((t / "children").read_text().split()) for t in Path(f"/proc/{os.getpid()}/task").iterdir())
        served = server.real_requests(5)
        time.sleep(3.0)
        open_after = server.server.config.http.registry.total
        for s in held:
            s.close()
    if children:
        return f"{children} child processes"
    return served if served != "served" or open_after == 0 else f"{open_after} still open after the send timeout"


def probe_serve_oversized_upload(world: World) -> str:
    """A commit declaring 1 GiB against a 10 MB commit limit, and a chunked one whose file runs
    past a 1 MB file limit: both 413, the first before any of its body is sent, the second
    before 16 MB of its endless body are sent."""
    with _LimitedServer(world.root / "served", max_file_size=1 << 20, max_commit_size=10 << 20) as server:
        auth = f"Authorization: Bearer {TOKEN}\r\nHost: x\r\n".encode()
        declared, _ = server.request(b"POST /api/kernels/org/big/commit/main HTTP/1.1\r\n" + auth +
                                     b"Content-Length: 1073741824\r\n\r\n")
        with server.connect() as s:
            s.sendall(b"POST /api/kernels/org/big/commit/main HTTP/1.1\r\n" + auth +
                      b"Transfer-Encoding: chunked\r\n\r\n")
            head = b'{"key": "header", "value": {"summary": "x"}}\n{"key": "file", "value": {"path": "a", "content": "'

            def chunk(data: bytes) -> bytes:
                return b"%x\r\n%s\r\n" % (len(data), data)

            sent, answer = 0, b""
            try:
                s.sendall(chunk(head))
                while sent < 64 << 20 and not select.select([s], [], [], 0)[0]:  # the answer must come long before
                    s.sendall(chunk(b"QUFB" * 16384))
                    sent += 65536
                answer = s.recv(64)
            except OSError:
                pass
    chunked = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    if declared == 413 and chunked == 413 and sent < 16 << 20:  # socket buffers take a few MB before the answer
        return "refused"
    return f"declared: {declared}, chunked: {chunked} after {sent >> 20} MB"


def probe_serve_malformed_bodies(world: World) -> str:
    """The campaign's malformed preupload bodies: each a 4xx naming its field, none a 500."""
    bodies = ['{"files": [1]}', '{"files": [null]}', '{"files": [[]]}', '{"files": ["a"]}',
              '{"files": [{"path": "\\ud800", "size": 1}]}']
    with _LimitedServer(world.root / "served") as server:
        wrong = []
        for body in bodies:
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("POST", "/api/kernels/org/big/preupload/main", body=body.encode(),
                         headers={"Authorization": f"Bearer {TOKEN}"})
            response = conn.getresponse()
            message = response.getheader("X-Error-Message", "")
            response.read()
            conn.close()
            if not 400 <= response.status < 500 or not ("files[0]" in message or "surrogate" in message):
                wrong.append(f"{body}: {response.status}")
    return "4xx naming the field" if not wrong else "; ".join(wrong)


def probe_serve_nul_path(world: World) -> str:
    with _LimitedServer(world.root / "served") as server:
        statuses = {server.request(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())[0]
                    for path in ("/api/organizations/%00/overview", "/kernels/org/big/resolve/main/a%00b",
                                 "/api/kernels/org/b%0Aig/refs")}
    return "clean 400" if statuses == {400} else f"statuses {sorted(statuses)}"


# -- the cache against planted entries, a hostile hub and its limits (issue 26) -------------------

def _planted_package(world: World) -> Path:
    """A package that leaves `ran` behind when imported."""
    evil = world.root / "evil"
    evil.mkdir(exist_ok=True)
    (evil / "__init__.py").write_text(f"import pathlib\npathlib.Path({str(world.root / 'ran')!r}).write_text('x')\n"
                                      "ops = 'planted'\n")
    return evil


def _ran(world: World, result: str) -> str:
    return "planted code ran" if (world.root / "ran").exists() else result


def probe_cache_linked_ops_folder(world: World) -> str:
    path = _cached(world)
    os.symlink(_planted_package(world), path / "_ops")
    return _ran(world, _load_after(world))


def probe_cache_planted_entry(world: World) -> str:
    path = _cached(world)
    plant = random.choice(["pth", "folder", "fifo", "package"])
    if plant == "pth":
        (path / "evil.pth").write_text(f"import sys; sys.path[:0] = [{str(_planted_package(world))!r}]\n")
    elif plant == "folder":
        (path / "empty").mkdir()
    elif plant == "fifo":
        os.mkfifo(path / "pipe")
    else:
        shutil.copytree(_planted_package(world), path / "_ops")
    return _ran(world, _load_after(world))


class _HttpWorld:
    """The tiny kernel on a real `kbuild hub serve`, behind a hostile hub (honest until told), and
    a lock file written while it was honest."""

    def __init__(self, world: World):
        from huggingface_hub import constants

        constants.HF_HUB_DISABLE_TELEMETRY = True  # nothing but 127.0.0.1
        self.server = ServerThread(world.root / "served")
        os.environ["HF_TOKEN"] = TOKEN
        world.kernel.publish(self.server.url)
        os.environ.pop("HF_TOKEN")
        poison = INIT.format(variant="?").replace("return x * 2", "return x * 3  # hostile").encode()
        self.hub = HostileHub(self.server.url, {"__init__.py": poison})
        locked = lock_kernel("org/tiny@v1", hub=self.hub.url)
        self.lockfile, self.sha = world.root / "kernels.lock", locked.commit
        write_lock(self.lockfile, [locked])

    def load(self, route: str):
        new_process()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if route == "lock":
                return get_locked_kernel("org/tiny", lockfile=self.lockfile)
            if route == "offline lock":
                return load_kernel("org/tiny", lockfile=self.lockfile)
            return get_kernel(f"org/tiny@{self.sha if route == 'sha' else 'v1'}", hub=self.hub.url,
                              trust_remote_code=True)

    def honest_everywhere(self) -> str:
        """With the hub honest again, what each route runs."""
        self.hub.hostile = False
        for route in ("sha", "v1", "lock"):
            if self.load(route).double(1) != 2:
                return f"poisoned code loaded by {route}"
        return "honest"

    def stop(self):
        self.hub.stop()
        self.server.stop()


def _cached_variants(world: World) -> list[Path]:
    return [p for p in Path(os.environ["KBUILD_CACHE"]).rglob("torch-*") if p.is_dir()]


def probe_cache_linked_ops_folder_http(world: World) -> str:
    http = _HttpWorld(world)
    try:
        path = install_kernel("org/tiny@v1", hub=http.hub.url)
        os.symlink(_planted_package(world), path / "_ops")
        module = http.load("v1")
        return _ran(world, "planted code loaded" if module.ops == "planted" else "re-fetched")
    finally:
        http.stop()


def probe_hostile_hub_refused_by_the_lock(world: World) -> str:
    http = _HttpWorld(world)
    try:
        http.hub.hostile = True
        try:
            http.load("lock")
            return "poisoned copy loaded by the lock"
        except kbuild.IntegrityError:
            pass
        if _cached_variants(world):
            return "refused copy stayed cached"
        result = http.honest_everywhere()
        return "refused, never loaded later" if result == "honest" else result
    finally:
        http.stop()


def probe_hostile_hub_cached_then_locked(world: World) -> str:
    http = _HttpWorld(world)
    try:
        http.hub.hostile = True
        if http.load("sha").double(1) != 3:
            return "probe error: the hostile hub served honest files"
        http.hub.hostile = False
        try:
            http.load("offline lock")
            return "poisoned copy loaded by the lock"
        except kbuild.IntegrityError:
            pass
        if _cached_variants(world):
            return "refused copy stayed cached"
        result = http.honest_everywhere()
        return "removed, never loaded later" if result == "honest" else result
    finally:
        http.stop()


def probe_listing_over_the_cap(world: World) -> str:
    http = _HttpWorld(world)
    try:
        http.hub.hostile, http.hub.claim_size = True, 5 << 30  # 5 GiB a file: 15 GiB for the variant
        http.hub.downloads = 0  # the lock read each variant's metadata.json
        try:
            http.load("v1")
            return "loaded"
        except VariantTooLarge:
            pass
        if http.hub.downloads or _cached_variants(world):
            return f"{http.hub.downloads} files downloaded before the refusal"
        return "refused before any download"
    finally:
        http.stop()


def probe_doubtful_copy_hub_gone(world: World) -> str:
    path = _cached(world)
    (path / "_ops.py").write_text("import os  # injected\n")
    world.hub.rename(world.root / "hub-gone")
    new_process()
    try:
        get_kernel(f"org/tiny@{path.parent.name}", hub=str(world.hub))
    except kbuild.IntegrityError as e:
        # what happened to the cache first (the file, the copy removed), then why no fresh copy came
        both = "_ops.py was changed" in str(e) and "copy was removed" in str(e) and "does not exist" in str(e)
        return "says both" if both else f"says only: {str(e)[-60:]}"
    return "loaded"


def probe_private_hub_without_token(world: World) -> str:
    server = ServerThread(world.root / "private", public_read=False)
    try:
        os.environ["HF_TOKEN"] = TOKEN
        world.kernel.publish(server.url)
        os.environ.pop("HF_TOKEN")
        try:
            get_kernel("org/tiny@v1", hub=server.url, trust_remote_code=True)
        except kbuild.RepoNotFound as e:
            return "names the token" if "HF_TOKEN" in str(e) else "RepoNotFound without a hint"
        return "loaded"
    finally:
        server.stop()


def probe_read_only_empty_cache(world: World) -> str:
    world.kernel.publish(world.hub)
    empty, view = world.root / "empty", world.root / "ro-empty"
    empty.mkdir()
    view.mkdir()
    if subprocess.run(["mount", "--bind", str(empty), str(view)], capture_output=True).returncode:
        return "not run (no bind mount)"
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        os.environ["KBUILD_CACHE"] = str(view)
        new_process()
        try:
            get_kernel("org/tiny@v1", hub=str(world.hub))
        except OSError as e:
            return "names KBUILD_CACHE" if "KBUILD_CACHE" in str(e) else f"bare {type(e).__name__}"
        return "loaded"
    finally:
        subprocess.run(["umount", str(view)], check=False)


# -- signatures: the require-signature rule (kbuild/signatures/check.py) against what a hub may hold -------
# Each probe first asserts that what it planted is what kbuild's loader reads: the hub's v1 listed by the
# loader's own reader (kbuild/hubs/local_git.py, which places files by kbuild/repo_layout.py's paths).

def _loader_reads(world: World, rel: str) -> bytes | None:
    """The bytes kbuild's loader fetches as the variant's file `rel` from the hub's org/tiny@v1, or None."""
    hub = LocalGitHub(world.hub)
    commit = hub.refs("org/tiny").branches["v1"]
    variant = _variant(world).name
    found = {f.path: f for f in hub.files("org/tiny", commit, variant)}
    return hub.read_file("org/tiny", commit, found[rel].repo_path) if rel in found else None


def _signature_read(world: World, planted: bytes | None) -> None:
    """ProbeMissed unless the loader reads `planted` as the variant's signature (None: no signature)."""
    read = _loader_reads(world, SIGNATURE)
    if read != planted:
        said = "no signature" if read is None else "another signature"
        raise ProbeMissed(f"the loader reads {said} for {_variant(world).name}, not the one planted "
                          f"(signatures live at {ssh_signature(_variant(world).name)})")


def _variant(world: World) -> Path:
    return world.kernel.variant("torch-cuda" if _gpu() else "torch-cpu")


def _keys(world: World) -> dict[str, Path]:
    """alice (whom org trusts, KBUILD_ALLOWED_SIGNERS) and mallory (whom it does not): real ssh-keygen keys."""
    keys = {}
    for name in ("alice", "mallory"):
        keys[name] = world.root / "keys" / name
        keys[name].parent.mkdir(exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(keys[name])], check=True)
    listing = world.root / "org.allowed_signers"
    listing.write_text("alice@example.com " + " ".join(Path(f"{keys['alice']}.pub").read_text().split()[:2]) + "\n")
    os.environ["KBUILD_ALLOWED_SIGNERS"] = f"org={listing}"
    return keys


def _refused_uncached(world: World, expect: str) -> str:
    """get_kernel under the rule: refused in one line saying `expect`, with nothing of it in the cache."""
    new_process()
    try:
        module = get_kernel("org/tiny@v1", hub=str(world.hub), require_signature=True)
    except kbuild.errors.SignatureRefused as e:
        cached = [p for p in (world.root / "cache" / "kernels").glob("*/*/*/*/*") if p.is_dir()]
        if cached:
            return "refused, but cached"
        return "refused, not cached" if expect in str(e) and "\n" not in str(e) else f"refused: {str(e)[:80]}"
    return "loaded" if module.double(1) == 2 else "tampered code loaded"


def _signer(signature: bytes) -> str:
    """The public key inside an SSH signature, as `ssh-keygen -Y check-novalidate` does not need one:
    its fingerprint, read from the signature's own blob."""
    blob = base64.b64decode(b"".join(line for line in signature.splitlines() if not line.startswith(b"-----")))
    key_len = struct.unpack(">I", blob[10:14])[0]  # "SSHSIG", version, then the public key as a string
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob[14:14 + key_len]).digest()).decode().rstrip("=")


def _fingerprint(key: Path) -> str:
    done = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{key}.pub"], check=True, capture_output=True,
                          text=True)
    return done.stdout.split()[1]


def probe_signature_unsigned(world: World) -> str:
    _keys(world)
    world.kernel.publish(world.hub)
    _signature_read(world, None)
    return _refused_uncached(world, "unsigned")


def probe_signature_unlisted_key(world: World) -> str:
    keys = _keys(world)
    world.kernel.publish(world.hub, "--sign", "--sign-key", str(keys["mallory"]))
    read = _loader_reads(world, "metadata.json.sig")
    if read is None or _signer(read) != _fingerprint(keys["mallory"]):
        raise ProbeMissed("the loader does not read mallory's signature for the variant")
    return _refused_uncached(world, "which no trusted allowed_signers file lists")


def probe_signature_over_other_digests(world: World) -> str:
    """alice's good signature of another build's metadata.json, published where this build's
    signature lives (kbuild.repo_layout.ssh_signature: signatures/<variant>/, since 0fde50f)."""
    keys = _keys(world)
    world.kernel.publish(world.hub, "--sign", "--sign-key", str(keys["alice"]))
    variant = _variant(world)
    meta = json.loads((variant / "metadata.json").read_text())
    meta["digest"]["files"]["__init__.py"] = "A" * 43 + "="
    other = world.root / "other.json"
    other.write_text(json.dumps(meta))
    subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "kbuild", "-f", str(keys["alice"]), str(other)], check=True,
                   capture_output=True)
    forged = Path(f"{other}.sig")
    backend = open_hub(parse_hub(str(world.hub)), None)
    backend.commit("org/tiny", "v1", uploads=[Upload(ssh_signature(variant.name), forged)], deletes=[],
                   message="a trusted signature over other digests", parent=backend.head("org/tiny", "v1"))
    _signature_read(world, forged.read_bytes())
    return _refused_uncached(world, "is not a good signature of this metadata.json")


def probe_signature_cached_then_required(world: World) -> str:
    _keys(world)
    world.kernel.publish(world.hub)
    _signature_read(world, None)
    get_kernel("org/tiny@v1", hub=str(world.hub))  # cached before the rule
    return _refused_uncached(world, "that cached copy was removed")


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


PROBES = {  # name -> (probe, the outcome that means it held)
    "publish: a link to a secret in a variant": (probe_publish_symlink, "refused"),
    "publish: a same-size, mtime-restored edit after the build": (probe_publish_edited, "refused"),
    "cache: a same-size, mtime-restored edit": (probe_cache_same_size_edit, "re-fetched"),
    "cache: a planted __pycache__ .pyc": (probe_cache_planted_pyc, "re-fetched"),
    "cache: a forged digest and a removed record": (probe_cache_forged_record, "re-fetched"),
    "trust: kernels-community on a non-official hub": (probe_trust_by_org_name, "refused"),
    "serve: 400 half-sent connections, then a real request": (probe_idle_connections, "served"),
    "publish: 8 slices at once to one branch": (probe_parallel_publish, "all landed"),
    "loader: a read-only populated cache, @v1": (probe_read_only_cache, "loaded"),
    "cache: a linked _ops/ folder beside _ops.py": (probe_cache_linked_ops_folder, "re-fetched"),
    "cache: a linked _ops/ folder beside _ops.py, HTTP hub": (probe_cache_linked_ops_folder_http, "re-fetched"),
    "cache: a planted .pth, folder, fifo or _ops/ package": (probe_cache_planted_entry, "re-fetched"),
    "cache: a hostile hub's edits under the honest commit, then sha, @v1, lock":
        (probe_hostile_hub_refused_by_the_lock, "refused, never loaded later"),
    "cache: a hostile hub's edits cached without a lock, then the lock": (probe_hostile_hub_cached_then_locked,
                                                                          "removed, never loaded later"),
    "loader: a listing that claims 15 GiB": (probe_listing_over_the_cap, "refused before any download"),
    "loader: a doubtful cached copy, the hub gone": (probe_doubtful_copy_hub_gone, "says both"),
    "loader: a private hub, no token": (probe_private_hub_without_token, "names the token"),
    "loader: an empty read-only cache": (probe_read_only_empty_cache, "names KBUILD_CACHE"),
    "serve: 600 slow request bodies, then 10 real requests within 1 s": (probe_serve_slow_bodies, "served"),
    "serve: 600 idle connections, then 10 real requests within 1 s": (probe_serve_idle, "served"),
    "serve: 600 slowloris connections, then 10 real requests within 1 s": (probe_serve_slowloris, "served"),
    "serve: 100 non-reading downloads (no process each, closed by the send timeout)":
        (probe_serve_non_reading_downloads, "served"),
    "serve: an oversized upload, declared and chunked": (probe_serve_oversized_upload, "refused"),
    "serve: the campaign's malformed preupload bodies": (probe_serve_malformed_bodies, "4xx naming the field"),
    "serve: NUL and newline in request paths": (probe_serve_nul_path, "clean 400"),
    "signatures: an unsigned variant, signature required": (probe_signature_unsigned, "refused, not cached"),
    "signatures: signed by a key the org does not list": (probe_signature_unlisted_key, "refused, not cached"),
    "signatures: a trusted signature over other digests": (probe_signature_over_other_digests, "refused, not cached"),
    "signatures: an unsigned copy cached before the rule": (probe_signature_cached_then_required,
                                                              "refused, not cached"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for name, (probe, safe) in PROBES.items():
        outcomes: collections.Counter[str] = collections.Counter()  # a probe's outcome: how often
        start = time.monotonic()
        for _ in range(args.attempts):
            with tempfile.TemporaryDirectory(prefix="kbuild-reliability-") as tmp:
                try:
                    outcomes[probe(World(Path(tmp)))] += 1
                except ProbeMissed as e:  # never a held probe: its set-up must be moved to where kbuild reads
                    outcomes[f"PROBE MISSED ITS TARGET: {e}"] += 1
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
