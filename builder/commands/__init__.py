"""The `kbuild` command line: one module per command (its arguments and its handler); `main` parses and dispatches.
Handlers parse, make one library call and render; the work lives in the stages below.
"""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, main=("parser",), arguments=("build_options",))
