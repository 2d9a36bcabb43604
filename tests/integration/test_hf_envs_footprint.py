"""What set-up step 5 leaves on a disk CI shares with other jobs (tests/helpers/hf_envs.py): the
Hugging Face environments keep one copy of each file they have in common with .venv or with each
other (hard links), and torch-2.15 goes without triton."""

from __future__ import annotations

import hashlib
import os
import stat
from collections import defaultdict
from pathlib import Path

import pytest

import hf_envs

MIB = 1 << 20


@pytest.fixture(scope="module")
def sites() -> list[Path]:
    try:
        for name in hf_envs.NAMES:
            hf_envs.ensure(name)
    except hf_envs.EnvError as e:
        pytest.fail(str(e))
    assert hf_envs.MAIN_SITE is not None
    return [hf_envs.MAIN_SITE, hf_envs.SHARED_TORCH,
            *(next((hf_envs.HOME / n / "lib").glob("python*/site-packages")) for n in hf_envs.NAMES)]


def digest(path: Path) -> str:
    h = hashlib.blake2b()
    with path.open("rb") as f:
        while chunk := f.read(MIB):
            h.update(chunk)
    return h.hexdigest()


def test_files_the_environments_share_are_one_copy(sites):
    """Every file of an environment of 1 MiB or more (the libraries: where the space is) that is byte
    for byte another one of the same mode there or in .venv is the same inode (hf_envs links those of
    16 KiB and over after each install; .venv's own are left as pip made them)."""
    main = sites[0]  # .venv's
    by_size: dict[tuple[int, int], dict[tuple[int, int], Path]] = defaultdict(dict)
    for site in sites:
        for folder, _, files in os.walk(site):
            for name in files:
                path = Path(folder, name)
                st = path.lstat()
                if stat.S_ISREG(st.st_mode) and st.st_size >= MIB:
                    by_size[(st.st_size, stat.S_IMODE(st.st_mode))][(st.st_dev, st.st_ino)] = path
    copies = []
    for inodes in by_size.values():
        if len(inodes) > 1:
            seen: dict[str, Path] = {}
            for path in inodes.values():
                other = seen.setdefault(digest(path), path)
                if other != path and not (path.is_relative_to(main) and other.is_relative_to(main)):
                    copies.append(f"{path} = {other}")
    assert copies == [], f"{len(copies)} identical file(s) kept as copies:\n" + "\n".join(copies[:10])


def test_torch_2_15_goes_without_triton(sites):
    (site,) = (hf_envs.HOME / "torch-2.15" / "lib").glob("python*/site-packages")
    assert hf_envs.LEFT_OUT == {"triton"}
    assert sorted(p.name for p in site.glob("triton*")) == []
    assert (site / "torch").is_dir() and sorted(site.glob("nvidia_cudnn*"))  # the rest of torch's requirements
