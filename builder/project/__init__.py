"""A kernel project as written: its build.toml (the schema), a workspace's members, the dependencies and CUDA
capabilities a manifest may name, the source's git identity, and `kbuild init`'s scaffold.
"""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.project.manifest import load_manifest as load_manifest
    from builder.project.workspace import kernel_dirs as kernel_dirs
    from builder.project.workspace import workspace_matrix as workspace_matrix

__all__, __getattr__ = lazy_exports(__name__, manifest=("load_manifest",),
                                    workspace=("kernel_dirs", "workspace_matrix"))
