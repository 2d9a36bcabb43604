"""`kbuild toolchain list|install|prune` (placeholder until builder/provision.py lands)."""


def add_parsers(subparsers) -> None:
    pass
