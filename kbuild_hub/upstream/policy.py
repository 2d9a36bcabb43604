"""Which names may be answered from the upstream (no dependency confusion): docs/upstream.md.

- A repo this hub holds is always served from here.
- An organisation that owns any repo here is this hub's: a name it lacks is not looked up upstream
  (someone could publish that name upstream and have it served as the team's), unless the
  organisation is named with `--upstream-org` (an org shared with the upstream on purpose).
- Creating a repo here whose name the upstream has is refused unless `--allow-shadowing` is given
  (kbuild_hub/server/repos.py asks `may_create`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kbuild_hub.errors import HubError, HubRepoNotFound


class ShadowsUpstream(HubError):
    http_status = 409


@dataclass(frozen=True)
class UpstreamPolicy:
    shared_orgs: frozenset[str] = frozenset()  # local orgs whose missing names may still come from upstream
    allow_shadowing: bool = False

    def may_fetch(self, org: str, local_orgs: set[str]) -> bool:
        return org not in local_orgs or org in self.shared_orgs

    def refuse_fall_through(self, repo_type: str, repo_id: str) -> HubRepoNotFound:
        org = repo_id.split("/")[0]
        return HubRepoNotFound(
            f"{repo_type} repository {repo_id} not found: organization {org} has repositories on this hub, "
            "so its other names are not looked up upstream",
            hint=f"publish it here, or let the upstream serve {org}'s missing names with "
                 f"`kbuild hub serve --upstream-org {org}`")
