"""The hubs kbuild publishes to, as a client (the service itself is kbuild_hub/): an address
from --hub / KBUILD_HUB / HF_ENDPOINT (address.py), one backend interface (backend.py) over a
local git store (local_backend.py, through kbuild_hub's gitstore) or an HTTP hub
(http_backend.py, through huggingface_hub), and `kbuild info`'s reading of what a hub holds
(kernel_info.py)."""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, address=("parse_hub",), backend=("Upload",), open=("open_hub",))
