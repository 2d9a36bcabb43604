"""`--hub` / `KBUILD_HUB`: a folder (or file:// URL) is a local hub, http(s):// an HTTP hub."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..errors import UsageError

DEFAULT_LOCAL_HUB = Path.home() / ".cache" / "kbuild" / "hub"


@dataclass(frozen=True)
class HubAddress:
    local: Path | None = None
    endpoint: str | None = None

    def __str__(self) -> str:
        return str(self.local) if self.local else self.endpoint


def parse_hub(value: str | None) -> HubAddress:
    """None means the embedded default, a local hub under ~/.cache/kbuild/hub."""
    if not value:
        return HubAddress(local=DEFAULT_LOCAL_HUB)
    parsed = urlparse(value)
    if parsed.scheme in ("http", "https"):
        if not parsed.netloc:
            raise UsageError(f"--hub: {value!r} has no host (expected e.g. http://127.0.0.1:8000)")
        return HubAddress(endpoint=value.rstrip("/"))
    if parsed.scheme == "file":
        return HubAddress(local=Path(unquote(parsed.path)))
    if parsed.scheme and len(parsed.scheme) > 1:
        raise UsageError(f"--hub: unsupported address {value!r} (expected a folder, file://, http:// or https://)")
    return HubAddress(local=Path(value).expanduser())
