"""manylinux policies (PEP 600): which names exist and what each allows, from auditwheel's own
policy data (its manylinux tables are the source of truth), so kbuild carries no table of its own.
The manifest validates `[general] manylinux` with it, the planner and the sysroot take a policy's
glibc and symbol versions, and the ABI floor of a built library is judged against it."""

from __future__ import annotations

from auditwheel.architecture import Architecture
from auditwheel.libc import Libc
from auditwheel.policy import WheelPolicies


def policy_error(policy: str, arch: str = "x86_64") -> str | None:
    """Why `policy` ("2_28", "manylinux_2_28") names no policy auditwheel knows; None if it does."""
    try:
        find_policy(policy, arch)
    except LookupError:
        known = ", ".join(p.name.removeprefix("manylinux_").removesuffix(f"_{arch}")
                          for p in reversed(list(all_policies(arch))) if p.name.startswith("manylinux_"))
        return f'unknown manylinux policy "{policy}" (known: {known})'
    return None


def policy_versions(policy: str, arch: str = "x86_64") -> dict[str, set[str]]:
    """The symbol versions `policy` allows, by family: {"GLIBC": {"2.2.5", ..., "2.28"}, ...}."""
    return {family: set(versions) for family, versions in find_policy(policy, arch).symbol_versions.items()}


def policy_glibc(policy: str, arch: str = "x86_64") -> str:
    """The glibc release a policy stands for: "2_28" (or manylinux2014) -> "2.28" ("2.17")."""
    major, minor = find_policy(policy, arch).name.split("_")[1:3]
    return f"{major}.{minor}"


def policy_name(policy: str, arch: str = "x86_64") -> str:
    return find_policy(policy, arch).name


def find_policy(policy: str, arch: str):
    name = policy if policy.startswith("manylinux") else f"manylinux_{policy}"
    if not name.endswith(arch):
        name = f"{name}_{arch}"
    return all_policies(arch).get_policy_by_name(name)


_POLICIES: dict[str, WheelPolicies] = {}


def all_policies(arch: str) -> WheelPolicies:
    if arch not in _POLICIES:
        _POLICIES[arch] = WheelPolicies(libc=Libc.GLIBC, arch=Architecture(arch))
    return _POLICIES[arch]
