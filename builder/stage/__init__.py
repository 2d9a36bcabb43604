"""After ninja: each variant's library checked (ABI, manylinux floor), its folder assembled with metadata.json and
swapped into build/ atomically; `kbuild clean`.
"""
