"""The hubs kbuild publishes to, as a client (the service itself is kbuild_hub/): an address
from --hub / KBUILD_HUB / HF_ENDPOINT (address.py), one backend interface (backend.py) over a
local git store (local_backend.py, through kbuild_hub's gitstore) or an HTTP hub
(http_backend.py, through huggingface_hub), and `kbuild info`'s reading of what a hub holds
(kernel_info.py)."""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.hub.address import parse_hub as parse_hub
    from builder.hub.backend import Upload as Upload
    from builder.hub.open import open_hub as open_hub

__all__, __getattr__ = lazy_exports(__name__, address=("parse_hub",), backend=("Upload",), open=("open_hub",))
