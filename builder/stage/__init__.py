"""After ninja: each variant's library checked (ABI, manylinux floor), its folder assembled with metadata.json and
swapped into build/ atomically; `kbuild clean`.
"""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.stage.link_check import unresolved_symbols as unresolved_symbols
    from builder.stage.load_check import load_errors as load_errors

__all__, __getattr__ = lazy_exports(__name__, link_check=("unresolved_symbols",), load_check=("load_errors",))
