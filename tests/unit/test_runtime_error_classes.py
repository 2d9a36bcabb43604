"""The runtime's error classes and a local folder without a kernel, in-process."""

from __future__ import annotations

import pytest

import kbuild
from kbuild import errors, get_local_kernel
from runtime_hubs import runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")


def caught(call) -> BaseException:
    with pytest.raises(kbuild.KernelError) as info:
        call()
    return info.value


def test_a_local_folder_without_a_kernel(tmp_path):
    e = caught(lambda: get_local_kernel(tmp_path / "nowhere", backend="cpu"))
    assert type(e) is errors.KernelNotFound and isinstance(e, FileNotFoundError)


def test_every_error_class_has_the_root_and_one_builtin_base():
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, Exception)]
    assert len(classes) > 10
    for c in classes:
        assert issubclass(c, errors.KernelError), c
        if c is not errors.KernelError:
            assert any(issubclass(c, b) for b in (ValueError, OSError, ImportError, RuntimeError, TypeError)), c
