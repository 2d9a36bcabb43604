"""What a cached variant folder may hold: exactly the files its verification lists, each a regular
file, and the folders on the way to them. Nothing else of any kind: no folder or link of its own,
no `__pycache__`, no `.pth`, no fifo.

kbuild.digest's `variant_files` cannot be this rule: it skips bytecode and lists a linked folder
without entering it, and a linked `_ops/` beside `_ops.py` is what Python imports (a package
wins over a module of the same name). Here every entry is looked at, and none is followed.
"""

from __future__ import annotations

import os
from pathlib import Path


def strays(folder: Path, files: set[str]) -> list[tuple[str, str]]:
    """(relative posix path, what is wrong) for every entry under `folder` that is not one of
    `files` as a regular file or a folder on the way to one, and for each of `files` that is not
    there; sorted by path, empty when the folder holds exactly `files`."""
    folders = {"/".join(rel.split("/")[:i]) for rel in files for i in range(1, rel.count("/") + 1)}
    found, wrong = set(), []
    pending = [("", Path(folder))]
    while pending:
        prefix, here = pending.pop()
        with os.scandir(here) as entries:
            for entry in entries:
                rel = prefix + entry.name
                if entry.is_symlink():
                    wrong.append((rel, "is no longer a regular file (a link)" if rel in files
                                  else "was added (a link)"))
                elif entry.is_dir(follow_symlinks=False):
                    if rel in folders:
                        pending.append((rel + "/", Path(entry.path)))
                    else:
                        wrong.append((rel, "was added (a folder)"))
                elif entry.is_file(follow_symlinks=False):
                    if rel in files:
                        found.add(rel)
                    else:
                        wrong.append((rel, "was added"))
                else:
                    wrong.append((rel, "was added (a fifo, socket or device)"))
    wrong += [(rel, "is missing") for rel in files - found if rel not in {w for w, _ in wrong}]
    return sorted(wrong)
