"""kbuild's runtime: load ABI-tagged kernel builds (DESIGN.md §4, §5).

Light on purpose: importing it loads neither torch nor anything of the builder; torch is
imported only when a system is detected or a kernel is loaded.
"""

from .digest import IntegrityError, digest_tree, verify_tree
from .local import get_local_kernel
from .metadata import VariantMetadata
from .variants import SystemInfo, Variant, choose, detect_system, format_trace, parse_variant, resolve

__version__ = "0.1.0"

__all__ = [
    "IntegrityError",
    "SystemInfo",
    "Variant",
    "VariantMetadata",
    "choose",
    "detect_system",
    "digest_tree",
    "format_trace",
    "get_local_kernel",
    "parse_variant",
    "resolve",
    "verify_tree",
]
