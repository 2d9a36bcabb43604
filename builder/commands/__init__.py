"""The `kbuild` command line: one module per command (its arguments and its handler); `main` parses and dispatches.
Handlers parse, make one library call and render; the work lives in the stages below.
"""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.commands.arguments import build_options as build_options
    from builder.commands.main import parser as parser

__all__, __getattr__ = lazy_exports(__name__, main=("parser",), arguments=("build_options",))
