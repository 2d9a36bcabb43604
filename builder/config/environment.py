"""The builder's environment: every environment variable kbuild's commands read, with its default,
resolved once per command into a frozen record. The runtime's counterpart is kbuild/settings.py,
whose hub rule (KBUILD_HUB, else HF_ENDPOINT, else the local hub), token and cache folder the
builder shares, so `publish`, `lock` and `get_kernel` can never disagree.

- `KBUILD_CACHE`: kbuild's cache (default ~/.cache/kbuild): probes, the compile cache, kernels
- `KBUILD_TOOLCHAINS`: the toolchain store (default ~/.cache/kbuild/toolchains)
- `KBUILD_TORCH_INDEX`: where CUDA builds of torch come from (default PyPI); `kbuild toolchain check-index` asks
  it which torch releases exist
- `KBUILD_VERSIONS`: an overlay versions table merged over kbuild's own (default
  `$XDG_CONFIG_HOME/kbuild/versions.toml` when it exists; `off`: none)
- `CUDA_HOME`, `CUDA_PATH`: the system nvcc's CUDA (else /usr/local/cuda, else nvcc on PATH)
- `CXX`: the C++ compiler (default c++)
- `CCACHE_DIR`: the compile cache's folder (default <cache>/compile)
- `SOURCE_DATE_EPOCH`: what `__DATE__`/`__TIME__` expand to (default 0)
- `TORCH_CUDA_ARCH_LIST`: the CUDA archs to build when `--cuda-archs` is not given
- `NVCC_THREADS`: threads per nvcc (default: sized from the free cores)
- `KBUILD_DIST_SCHEDULER`, `KBUILD_DIST_TOKEN`: distributed compiles: the sccache-dist scheduler (`off`), else
  the workspace's `[workspace.dist] scheduler`; its client token
- `KBUILD_SIGNING_KEY`: the SSH key `kbuild publish --sign` signs with (after `--sign-key`, before the
  signatures file's `sign-key`, kbuild/signatures/rules.py)
- `KBUILD_REMOTE_CACHE`: the shared compile cache (`redis://host:port`, …; `off`), else the workspace's
  `[workspace.cache] remote`
- `CI`: plain log lines instead of a live progress display
- `PYTHONPATH`, `LOCAL_KERNELS`, `HF_HUB_OFFLINE`: kept for a kernel's tests: `kbuild test` adds its own entries
  to the caller's
- `KBUILD_HUB`, `HF_ENDPOINT`, `HF_TOKEN`: the hub and its token (kbuild/settings.py)
- `KBUILD_HUB_UPSTREAM`: `kbuild hub serve`'s upstream hub when `--upstream` does not name one
  (docs/upstream.md); `off`: none
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from builder.config.cascade import DEFAULT, Setting, resolve
from builder.hub.address import parse_hub
from kbuild import settings as runtime
from kbuild_common.errors import UsageError

PYPI = "https://pypi.org/simple"
DEFAULT_TOOLCHAINS = runtime.DEFAULT_CACHE / "toolchains"
PROBES = "probes"  # under the cache folder: what probe_torch and find_cuda learned, by binary


@dataclass(frozen=True)
class BuilderSettings:
    cache_dir: Path = runtime.DEFAULT_CACHE
    toolchains_dir: Path = DEFAULT_TOOLCHAINS
    torch_index: str = PYPI
    cuda_home: str | None = None
    cxx: str = "c++"
    ccache_dir: Path | None = None
    source_date_epoch: str = "0"
    cuda_arch_list: str | None = None
    nvcc_threads: str | None = None  # as written; the CLI checks it is a positive number
    remote_cache: str | None = field(default=None, repr=False)  # as written (may hold a password)
    dist_scheduler: str | None = None
    dist_token: str | None = field(default=None, repr=False)
    ci: bool = False
    hub: str | None = None  # None: the default local hub
    hub_from: str | None = None  # the variable that named it (KBUILD_HUB or HF_ENDPOINT)
    token: str | None = field(default=None, repr=False)
    # the caller's, which `kbuild test` extends for a kernel's suite rather than replaces
    pythonpath: str | None = None
    local_kernels: str | None = None
    hf_hub_offline: str | None = None  # as written: an explicit value from the caller stands
    signing_key: str | None = None  # KBUILD_SIGNING_KEY, as written
    signing_key_file: tuple[Path, str] | None = None  # the signatures file's `sign-key` (key, file:line)
    signatures_file: Path | None = None
    hub_upstream: str | None = None  # KBUILD_HUB_UPSTREAM, as written: `hub serve`'s upstream after --upstream
    signature_rules: object = field(default=None, repr=False)  # the runtime's SignatureSettings (hub mirror checks)

    def signing_key_setting(self, flag: str | None) -> Setting[Path]:
        """The key `publish --sign` uses: --sign-key, else KBUILD_SIGNING_KEY, else the signatures
        file's `sign-key` line; a private key file, or a public key whose private half ssh-agent holds."""
        found = self.signing_key_file
        setting = resolve(flag=("--sign-key", flag), env=("KBUILD_SIGNING_KEY", self.signing_key),
                          toml=(lambda: (str(found[0]), found[1])) if found else None)
        if setting is None:
            raise UsageError("--sign: no signing key: pass --sign-key KEY_FILE, set KBUILD_SIGNING_KEY, or add a line "
                             f"`sign-key KEY_FILE` to {self.signatures_file}")
        path = Path(setting.value).expanduser()
        if not path.is_file():
            raise UsageError(f"{setting.origin}: {path} is not a file (expected an SSH private key, or the public key "
                             "of one that ssh-agent holds)")
        return Setting(path, setting.origin)

    def hub_setting(self, flag: str | None) -> Setting[str | None]:
        """The hub a command talks to through the one cascade: --hub, else KBUILD_HUB, else
        HF_ENDPOINT (the runtime's rule), else the default local hub (value None); checked, so a
        bad address is a one-line error naming the flag or variable it came from."""
        return self._hub(flag)[0]

    def hub_address(self, flag: str | None):
        """hub_setting's hub, parsed (a kbuild.hubs.HubAddress), for the commands that open it."""
        return self._hub(flag)[1]

    def _hub(self, flag: str | None):
        env = (self.hub_from, self.hub) if self.hub_from else None
        setting = resolve(flag=("--hub", flag), env=env) or Setting(None, f"{DEFAULT} ({runtime.DEFAULT_LOCAL_HUB})")
        return setting, parse_hub(setting.value, setting.origin)

    @property
    def probe_dir(self) -> Path:
        return self.cache_dir / PROBES


def versions_overlay(environ=None) -> Setting[Path] | None:
    """The overlay versions table merged over kbuild's own (builder/toolchains/versions.py), through
    the one cascade: KBUILD_VERSIONS (`off`: none), else the user's `versions.toml` in kbuild's
    config folder when it exists. None: no overlay. Its origin names the variable or the file."""
    env = os.environ if environ is None else environ
    user = user_versions_file(env)
    setting = resolve(env=("KBUILD_VERSIONS", env.get("KBUILD_VERSIONS")), can_turn_off=True,
                      toml=lambda: (str(user), f"{user} (kbuild's config folder)") if user.is_file() else None)
    if setting is None or setting.value is None:
        return None
    return Setting(Path(setting.value).expanduser(), setting.origin)


def user_versions_file(environ=None) -> Path:
    """`$XDG_CONFIG_HOME/kbuild/versions.toml` (beside trusted-orgs and signatures)."""
    return runtime.config_file(environ).with_name("versions.toml")


def from_environment(environ=None) -> BuilderSettings:
    env = os.environ if environ is None else environ
    shared = runtime.from_environment(env)
    return BuilderSettings(
        cache_dir=shared.cache_dir,
        toolchains_dir=Path(env["KBUILD_TOOLCHAINS"]).expanduser() if env.get("KBUILD_TOOLCHAINS")
        else DEFAULT_TOOLCHAINS,
        torch_index=env.get("KBUILD_TORCH_INDEX") or PYPI,
        cuda_home=env.get("CUDA_HOME") or env.get("CUDA_PATH") or None,
        cxx=env.get("CXX") or "c++",
        ccache_dir=Path(env["CCACHE_DIR"]) if env.get("CCACHE_DIR") else None,
        source_date_epoch=env.get("SOURCE_DATE_EPOCH") or "0",
        cuda_arch_list=env.get("TORCH_CUDA_ARCH_LIST") or None,
        nvcc_threads=env.get("NVCC_THREADS") or None,
        remote_cache=env.get("KBUILD_REMOTE_CACHE") or None,
        dist_scheduler=env.get("KBUILD_DIST_SCHEDULER") or None,
        dist_token=env.get("KBUILD_DIST_TOKEN") or None,
        ci=bool(env.get("CI")),
        hub=shared.hub,
        hub_from=shared.hub_from,
        token=shared.token,
        pythonpath=env.get("PYTHONPATH") or None,
        local_kernels=env.get("LOCAL_KERNELS") or None,
        hf_hub_offline=env.get("HF_HUB_OFFLINE"),
        signing_key=env.get("KBUILD_SIGNING_KEY") or None,
        signing_key_file=shared.signatures.sign_key,
        signatures_file=runtime.signers.signatures_file(env),
        hub_upstream=env.get("KBUILD_HUB_UPSTREAM") or None,
        signature_rules=shared.signatures,
    )
