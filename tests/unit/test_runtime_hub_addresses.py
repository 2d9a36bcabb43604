"""Pinning errors, an unreachable hub without a cache, and trust entries, without a server."""

from __future__ import annotations

import pytest

from kbuild import get_kernel
from runtime_hubs import runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")


# -- the error messages ----------------------------------------------------------------------------


@pytest.mark.parametrize("call, message", [
    (lambda: get_kernel("org/tiny@v1", version=1), "pin the kernel once"),
    (lambda: get_kernel("org/tiny", revision="v1", version=1), "pin the kernel once"),
    (lambda: get_kernel("org/tiny@"), "nothing after '@'"),
    (lambda: get_kernel("tiny@v1"), "not a kernel repo id"),
    (lambda: get_kernel("org/../x@v1"), "not a kernel repo id"),
    (lambda: get_kernel("org/tiny", version=-1), "non-negative integer"),
])
def test_pinning_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_an_unreachable_hub_without_a_cache_says_so(tmp_path):
    with pytest.raises(OSError, match="local hub .* does not exist"):
        get_kernel("org/tiny@v1", hub=str(tmp_path / "nowhere"))


def test_trust_entries_name_an_organisation_on_a_hub():
    from kbuild.settings import BUILTIN_TRUSTED_ORGS, Settings
    from kbuild.trust import check_trust

    settings = Settings(trusted_orgs=BUILTIN_TRUSTED_ORGS + ("acme@http://10.0.0.1:8000",))
    check_trust("kernels-community/x", "https://huggingface.co/", False, settings)
    check_trust("acme/x", "HTTP://10.0.0.1:8000/", False, settings)
    check_trust("anyone/x", None, False, settings)  # a local hub: you published it
    for repo, endpoint in [("kernels-community/x", "http://127.0.0.1:8000"), ("acme/x", "https://huggingface.co"),
                           ("acme/x", "http://10.0.0.1:8001")]:
        with pytest.raises(ValueError, match="is not trusted on"):
            check_trust(repo, endpoint, False, settings)
