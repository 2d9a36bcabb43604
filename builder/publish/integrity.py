"""What `kbuild publish` may upload from a build folder: regular files only, each one covered by
the variant's metadata.json digest and unchanged since the build, built from the sources the
kernel folder holds now.

Every consumer verifies a variant against its digest before importing it, so a file that no
longer matches would make the whole branch unloadable; a link would upload whatever it points
to (a secret, say). Both are refused here, before anything leaves the machine.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kbuild.digest import file_digest, is_digested, variant_files
from kbuild_common.errors import ExitCode, KbuildError


class UnpublishableBuild(KbuildError):
    """A build folder publish refuses: a link or special file, no digest, or a file that no longer
    matches it (the loader's own mismatch, on a downloaded copy, is kbuild.errors.IntegrityError)."""

    exit_code = ExitCode.REFUSED


def regular_files(folder: Path) -> dict[str, Path]:
    """Relative posix path -> file for every file of `folder` that counts (kbuild.digest's
    variant_files: bytecode is never published). A symbolic link, or anything that is not a
    regular file or folder, is an error naming it: its bytes are not the build's."""
    _refuse_special(folder, folder.lstat())
    entries = variant_files(folder, folders=True)
    for path in entries.values():
        _refuse_special(path, path.lstat())
    return {rel: path for rel, path in entries.items() if not path.is_dir()}  # no links left: real folders


def _refuse_special(path: Path, st: os.stat_result) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise UnpublishableBuild(
            f"{path}: a symbolic link (to {os.readlink(path)}); publish uploads regular files only",
            hint="replace it with the file it points to, or rebuild: kbuild build never makes links")
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise UnpublishableBuild(f"{path}: not a regular file (a fifo, socket or device); "
                                 "publish uploads regular files only")


def verify_variant(folder: Path, metadata: dict) -> dict[str, Path]:
    """The variant's files (metadata.json and its signatures included) after checking every other one against the
    digest its metadata.json records; UnpublishableBuild names the first that does not match."""
    files = regular_files(folder)
    digest = (metadata.get("digest") or {}).get("files")
    if not isinstance(digest, dict):
        raise UnpublishableBuild(f"{folder / 'metadata.json'}: no digest; publish uploads only what a build recorded",
                             hint=f"rebuild {folder.name} with kbuild build")
    rebuild = f"rebuild it (kbuild build --variant {folder.name}); a build's files are never edited in place"
    # metadata.json and a signature over it (a CI's sigstore bundle) are outside the digest
    for rel in sorted({rel for rel in files if is_digested(rel)} | set(digest)):
        if rel not in files:
            raise UnpublishableBuild(f"{folder / rel}: listed in metadata.json's digest but missing", hint=rebuild)
        if rel not in digest:
            raise UnpublishableBuild(f"{folder / rel}: not covered by metadata.json's digest (added after the build)",
                                 hint=rebuild)
        if file_digest(files[rel]) != digest[rel]:
            raise UnpublishableBuild(f"{folder / rel}: changed since the build (does not match metadata.json's digest)",
                                 hint=rebuild)
    return files
