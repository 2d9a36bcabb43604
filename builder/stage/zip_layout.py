"""The zip build layout (kernels 0.19; edition 6's `[general] build-layout = "zip"`): a variant's
Python package (its sources, `_ops.py`, any pyext data files) goes into `<id>.zip`, `__init__.py`
at the archive's root, and its libraries stay beside the archive. The loader imports the package
from the archive and finds the library in the variant folder, which is the package's other search
location (kernels 0.19.1's importer; docs/formats.md, "The zip layout").

The archive is reproducible: entries in sorted path order, every entry dated 1980-01-01 00:00 (the
zip format's first representable time, so no build time or source mtime leaks in), one mode, and
stored, not deflated: zlib's output is not promised to be the same across zlib builds, and kernel
packages are a few kB.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# the first `kernels` release that reads the layout: written into metadata.json so that older
# releases refuse the variant in one line instead of finding no package in the folder
KERNELS_MINVER = "0.19.0"
_LIBRARY_SUFFIXES = (".so",)


def archive_name(ops_name: str) -> str:
    return f"{ops_name}.zip"


def pack_python(folder: Path, ops_name: str) -> Path:
    """Move every file of the staged `folder` but its libraries into `folder/<ops_name>.zip`."""
    members = sorted((p for p in folder.rglob("*") if p.is_file() and p.suffix not in _LIBRARY_SUFFIXES),
                     key=lambda p: p.relative_to(folder).as_posix())
    archive = folder / archive_name(ops_name)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        for path in members:
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=ZIP_TIME)
            info.create_system = 3  # Unix, whatever the host: the mode below is read as Unix's
            info.external_attr = 0o100644 << 16
            z.writestr(info, path.read_bytes())
    for path in members:
        path.unlink()
    for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        sub.rmdir()  # emptied above; a folder left with a library in it is a bug to hear about
    return archive


def layout_metadata(layout: str) -> dict:
    """The metadata.json keys of a variant staged in `layout` (none for the files layout, which
    every kernels release reads)."""
    return {"build-layout": "zip", "kernels-minver": KERNELS_MINVER} if layout == "zip" else {}
