"""kbuild's build-and-publish engine: manifest → plan → ninja → variants. Behind the `kbuild` CLI."""

__version__ = "0.1.0"

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, report=("Reporter",), layout=("WORK_DIR",))
