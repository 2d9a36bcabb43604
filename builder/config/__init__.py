"""What a command was asked for, resolved once: the environment's settings and a build's options, frozen.
"""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, environment=("PYPI", "from_environment"), options=("BuildOptions",))
