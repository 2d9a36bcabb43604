"""A kernel project as written: its build.toml (the schema), a workspace's members, the dependencies and CUDA
capabilities a manifest may name, the source's git identity, and `kbuild init`'s scaffold.
"""
