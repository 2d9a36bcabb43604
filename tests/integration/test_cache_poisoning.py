"""A hostile hub cannot poison the cache (issue 26): a hub on 127.0.0.1 that serves edited files
under the honest commit id, with a metadata.json whose digest matches the edit (tests/helpers/
hostile_hub.py). Only a lock file's hash of metadata.json can tell; what it refuses is never
cached, or is removed, so no later load by any route (the sha, `@v1`, the lock) runs it."""

from __future__ import annotations

import pytest

from hostile_hub import HostileHub
from kbuild import IntegrityError, get_kernel, get_locked_kernel, load_kernel
from kbuild.lockfile import lock_kernel, write_lock
from runtime_hubs import INIT, Kernel, new_process, runtime_env, start_server, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

POISON = INIT.format(variant="?").replace("return x * 2", "return x * 3  # the hostile hub's").encode()


@pytest.fixture
def hostile(tmp_path, monkeypatch, runtime_env):
    """(the hostile hub, honest for now; the lock file written against it; the locked commit)."""
    served, stop = start_server(tmp_path / "served")
    kernel = Kernel(tmp_path / "tiny").write().build()
    monkeypatch.setenv("HF_TOKEN", served.token)
    kernel.publish(served.url)
    monkeypatch.delenv("HF_TOKEN")
    hub = HostileHub(served.url, {"__init__.py": POISON})
    locked = lock_kernel("org/tiny@v1", hub=hub.url)
    write_lock(tmp_path / "kernels.lock", [locked])
    yield hub, tmp_path / "kernels.lock", locked.commit
    hub.stop()
    stop()


def cached_copies(cache) -> list:
    """Variant folders, their markers and leftovers of fetches under the cache."""
    return sorted(p.name for p in cache.glob("*/*/*/*/*") if p.is_dir() or p.name.endswith(".verified"))


def load(route: str, hub: HostileHub, lockfile, sha: str):
    if route == "lock":
        return get_locked_kernel("org/tiny", lockfile=lockfile)
    return get_kernel(f"org/tiny@{sha if route == 'sha' else 'v1'}", hub=hub.url, trust_remote_code=True)


def test_what_the_lock_refuses_is_never_cached_and_no_route_loads_it(hostile, runtime_env):
    hub, lockfile, sha = hostile
    hub.hostile = True
    with pytest.raises(IntegrityError, match=r"org/tiny@\w+ build/torch-\w+: metadata.json does not match the lock"):
        get_locked_kernel("org/tiny", lockfile=lockfile)
    assert cached_copies(runtime_env) == []
    new_process()
    with pytest.raises(IntegrityError, match="the last copy of it was refused .*does not match the lock file"):
        load_kernel("org/tiny", lockfile=lockfile)  # offline: says why nothing is there
    hub.hostile = False  # the hub honest again: every route loads the honest files
    for route in ("sha", "v1", "lock"):
        new_process()
        assert load(route, hub, lockfile, sha).double(1) == 2, route
    new_process()
    assert load_kernel("org/tiny", lockfile=lockfile).double(1) == 2


def test_a_poisoned_copy_cached_without_a_lock_is_removed_by_the_lock(hostile, runtime_env):
    hub, lockfile, sha = hostile
    hub.hostile = True
    # Without a lock nothing can tell (the hub answers the listing): the poison is cached and runs.
    assert get_kernel(f"org/tiny@{sha}", hub=hub.url, trust_remote_code=True).double(1) == 3
    hub.hostile = False
    new_process()
    with pytest.raises(IntegrityError, match="does not match the lock file.*offline mode is on"):
        load_kernel("org/tiny", lockfile=lockfile)
    assert cached_copies(runtime_env) == []  # refused, so removed: the sha no longer finds it
    new_process()
    assert load("sha", hub, lockfile, sha).double(1) == 2  # fetched again, honest


def test_the_lock_refetches_a_poisoned_copy_from_an_honest_hub(hostile, runtime_env):
    hub, lockfile, sha = hostile
    hub.hostile = True
    assert get_kernel("org/tiny@v1", hub=hub.url, trust_remote_code=True).double(1) == 3
    hub.hostile = False
    new_process()
    with pytest.warns(UserWarning, match="does not match the lock file.*fetched it again"):
        assert get_locked_kernel("org/tiny", lockfile=lockfile).double(1) == 2
    for route in ("sha", "v1"):
        new_process()
        assert load(route, hub, lockfile, sha).double(1) == 2, route


def test_a_hostile_hub_after_the_honest_copy_is_cached_changes_nothing(hostile):
    hub, lockfile, sha = hostile
    assert get_locked_kernel("org/tiny", lockfile=lockfile).double(1) == 2
    hub.hostile = True
    for route in ("sha", "v1", "lock"):  # the commit is cached and verified: the hub is asked at most for refs
        new_process()
        assert load(route, hub, lockfile, sha).double(1) == 2, route
