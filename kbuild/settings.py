"""The runtime's settings, read from the environment once per call into a frozen record.

Nothing else in the runtime reads `os.environ`; tests pass a Settings instead of patching.

| variable | meaning |
|---|---|
| `KBUILD_HUB` | the hub: a folder or file:// URL (a local git hub) or an http(s):// URL |
| `HF_ENDPOINT` | an HTTP hub, used when neither `hub=` nor `KBUILD_HUB` names one |
| `KBUILD_CACHE` | kbuild's cache folder (kernels go to `<it>/kernels`; default ~/.cache/kbuild) |
| `KBUILD_OFFLINE`, `HF_HUB_OFFLINE` | never make a network request; load from the cache only |
| `KBUILD_TRUSTED_ORGS` | comma-separated `org` (on the official Hub) or `org@http://host:port` (on that hub) entries whose kernels load without trust_remote_code |
| `LOCAL_KERNELS` | `org/a=/path:org/b=/path`: load these repos from local builds instead |
| `HF_TOKEN` | the token for HTTP hubs (huggingface_hub also reads its own token file) |
| `KBUILD_MAX_VARIANT_BYTES` | the most one variant's download may write (default 8G; a byte count, or with a K, M, G or T suffix, powers of 1024): a listing that claims more is refused before anything is downloaded, and a download stops once the hub has sent more than its listing's total or this cap |
| `KBUILD_REQUIRE_SIGNATURE`, `KBUILD_ALLOWED_SIGNERS`, `KBUILD_SIGNATURES` | which organisations' variants must be signed, and by whom (kbuild/signatures/rules.py) |
| `KBUILD_GPU_ARCH` | judge variants for a GPU of this arch (`9.0`, `gfx942`) instead of torch's current device: for tests, and to check on one machine what another would load |
"""  # noqa: E501 - a markdown table row is one line, however long

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidSetting
from .signatures import rules as signers

DEFAULT_LOCAL_HUB = Path.home() / ".cache" / "kbuild" / "hub"
DEFAULT_CACHE = Path.home() / ".cache" / "kbuild"
# Hugging Face marks this organisation a trusted kernel publisher; trusted here on the official
# Hub only (kbuild.trust: an entry without @hub names the official Hub).
BUILTIN_TRUSTED_ORGS = ("kernels-community",)
_TRUE = ("1", "true", "yes", "on")
# Far above any real variant (flash-attn2 for one arch is 222 MB), far below a disk's worth.
DEFAULT_MAX_VARIANT_BYTES = 8 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True)
class Settings:
    hub: str | None = None  # None: the default local hub
    hub_from: str | None = None  # the variable that named `hub` (KBUILD_HUB or HF_ENDPOINT), for errors
    cache_dir: Path = DEFAULT_CACHE
    offline: bool = False
    trusted_orgs: tuple[str, ...] = BUILTIN_TRUSTED_ORGS
    local_kernels: dict[str, Path] = field(default_factory=dict, compare=False)
    token: str | None = field(default=None, repr=False)
    max_variant_bytes: int = DEFAULT_MAX_VARIANT_BYTES
    signatures: signers.SignatureSettings = field(default_factory=signers.SignatureSettings, compare=False)

    @property
    def kernels_cache(self) -> Path:
        return self.cache_dir / "kernels"


def from_environment(environ=None) -> Settings:
    env = os.environ if environ is None else environ
    hub_from = next((k for k in ("KBUILD_HUB", "HF_ENDPOINT") if env.get(k)), None)  # the hub rule
    return Settings(
        hub=env.get(hub_from) if hub_from else None,
        hub_from=hub_from,
        cache_dir=Path(env["KBUILD_CACHE"]).expanduser() if env.get("KBUILD_CACHE") else DEFAULT_CACHE,
        offline=any(env.get(k, "").strip().lower() in _TRUE for k in ("KBUILD_OFFLINE", "HF_HUB_OFFLINE")),
        trusted_orgs=BUILTIN_TRUSTED_ORGS + _split_orgs(env.get("KBUILD_TRUSTED_ORGS", "")) + _config_orgs(env),
        local_kernels=parse_local_kernels(env.get("LOCAL_KERNELS", "")),
        token=env.get("HF_TOKEN") or None,
        max_variant_bytes=parse_byte_count("KBUILD_MAX_VARIANT_BYTES", env.get("KBUILD_MAX_VARIANT_BYTES", "")),
        signatures=signers.from_environment(env),
    )


def parse_byte_count(name: str, value: str, default: int = DEFAULT_MAX_VARIANT_BYTES) -> int:
    """`8G`, `500M`, `1048576` (powers of 1024; a trailing `B`/`iB` is allowed); `default` when empty."""
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    if not text:
        return default
    number, unit = (text[:-1], text[-1]) if text[-1] in _UNITS else (text, "")
    try:
        count = int(float(number) * _UNITS[unit]) if number.strip() else 0
    except (ValueError, OverflowError):  # not a number, nan, inf
        count = 0
    if count <= 0:
        raise InvalidSetting(f"{name}: expected a positive byte count such as 8G, 500M or 1048576, got {value!r}")
    return count


def gpu_arch_override(environ=None) -> str | None:
    """`KBUILD_GPU_ARCH`, as given (kbuild.variants.detect_system checks its spelling)."""
    env = os.environ if environ is None else environ
    return env.get("KBUILD_GPU_ARCH", "").strip() or None


def parse_local_kernels(value: str) -> dict[str, Path]:
    """`org/a=/path/a:org/b=/path/b` (Hugging Face's LOCAL_KERNELS format)."""
    overrides = {}
    for entry in filter(None, value.split(":")):
        repo_id, sep, path = entry.partition("=")
        if not sep or "/" not in repo_id or not path:
            raise InvalidSetting(f"LOCAL_KERNELS: bad entry {entry!r} "
                                 "(expected org/repo=/path, entries separated by ':')")
        overrides[repo_id.strip()] = Path(path).expanduser()
    return overrides


def _split_orgs(value: str) -> tuple[str, ...]:
    return tuple(o.strip() for o in value.replace("\n", ",").split(",") if o.strip())


def config_file(environ=None) -> Path:
    """`$XDG_CONFIG_HOME/kbuild/trusted-orgs`: one organisation per line, `#` starts a comment."""
    env = os.environ if environ is None else environ
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "kbuild" / "trusted-orgs"


def _config_orgs(env) -> tuple[str, ...]:
    try:
        text = config_file(env).read_text(encoding="utf-8")
    except OSError:
        return ()
    return _split_orgs("\n".join(line.partition("#")[0] for line in text.splitlines()))
