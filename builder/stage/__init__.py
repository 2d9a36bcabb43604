"""After ninja: each variant's library checked (ABI, manylinux floor), its folder assembled with metadata.json and
swapped into build/ atomically; `kbuild clean`.
"""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, link_check=("unresolved_symbols",), load_check=("load_errors",))
