"""A kernel project as written: its build.toml (the schema), a workspace's members, the dependencies and CUDA
capabilities a manifest may name, the source's git identity, and `kbuild init`'s scaffold.
"""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, manifest=("load_manifest",),
                                    workspace=("kernel_dirs", "workspace_matrix"))
