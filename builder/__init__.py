"""kbuild's build-and-publish engine: manifest → plan → ninja → variants. Behind the `kbuild` CLI."""

__version__ = "0.1.0"
