"""kbuild.errors: every loading failure is a KernelError, and each keeps the built-in base it had
before there was a root, so callers written against those still catch them. Against a real local
git hub with a kernel published by the real `kbuild publish`.
"""

from __future__ import annotations

import pytest

import kbuild
from kbuild import errors, get_kernel, get_local_kernel, has_kernel
from kbuild.loading import find_variant
from runtime_hubs import CPU, ROCM, Kernel, runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    return Kernel(tmp_path / "tiny").write(backends=("cpu",)).build()


@pytest.fixture
def hub(tmp_path, kernel):
    hub = tmp_path / "hub"
    kernel.publish(hub)
    return hub


def caught(call) -> BaseException:
    with pytest.raises(kbuild.KernelError) as info:
        call()
    return info.value


def test_no_variant_fits_is_a_kernel_error_and_a_file_not_found_error(hub, kernel):
    e = caught(lambda: get_kernel("org/tiny@v1", hub=str(hub), system=ROCM))
    assert type(e) is errors.NoVariantFits and isinstance(e, FileNotFoundError)
    assert "no variant of org/tiny@v1 fits this system" in str(e)
    local = caught(lambda: find_variant(kernel.root, ROCM))  # the local loader says it the same way
    assert type(local) is errors.NoVariantFits and isinstance(local, FileNotFoundError)
    assert has_kernel("org/tiny@v1", hub=str(hub), system=ROCM) is False
    assert has_kernel("org/tiny@v1", hub=str(hub), system=CPU) is True


@pytest.mark.parametrize("request_, hub_name, kind, builtin", [
    ("org/none@v1", "hub", errors.RepoNotFound, FileNotFoundError),
    ("org/tiny@v9", "hub", errors.RevisionNotFound, ValueError),
    ("org/tiny", "hub", errors.MissingPin, ValueError),
    ("not a repo@v1", "hub", errors.InvalidRequest, ValueError),
    ("org/tiny@v1", "no-such-hub", errors.HubUnreachable, OSError),
])
def test_each_failure_keeps_its_builtin_base(hub, request_, hub_name, kind, builtin):
    e = caught(lambda: get_kernel(request_, hub=str(hub.parent / hub_name), system=CPU))
    assert type(e) is kind and isinstance(e, builtin), repr(e)


def test_an_unknown_hub_address(hub):
    e = caught(lambda: get_kernel("org/tiny@v1", hub="ftp://example.org", system=CPU))
    assert type(e) is errors.InvalidRequest and isinstance(e, ValueError)
    assert "unsupported hub address 'ftp://example.org'" in str(e)


def test_a_changed_build_is_an_integrity_error_and_a_value_error(kernel):
    init = kernel.variant("torch-cpu") / "__init__.py"
    init.write_text(init.read_text() + "\nCHANGED = True\n")
    e = caught(lambda: get_local_kernel(kernel.root, backend="cpu"))
    assert type(e) is errors.IntegrityError and isinstance(e, ValueError)
    assert "__init__.py does not match metadata.json's digest" in str(e)
