"""What a command was asked for, resolved once: the environment's settings and a build's options, frozen.
"""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.config.environment import PYPI as PYPI
    from builder.config.environment import from_environment as from_environment
    from builder.config.options import BuildOptions as BuildOptions

__all__, __getattr__ = lazy_exports(__name__, environment=("PYPI", "from_environment"), options=("BuildOptions",))
