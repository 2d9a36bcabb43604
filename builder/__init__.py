"""kbuild's build-and-publish engine: manifest → plan → ninja → variants. Behind the `kbuild` CLI."""

__version__ = "0.1.0"

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.layout import WORK_DIR as WORK_DIR
    from builder.report import Reporter as Reporter

__all__, __getattr__ = lazy_exports(__name__, report=("Reporter",), layout=("WORK_DIR",))
