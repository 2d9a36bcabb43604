"""`kbuild info`: what a hub holds for a kernel, read through the runtime's own hub readers (a
local git hub or an HTTP hub): its version branches, and at the requested revision (default: the
newest vN) each variant with its size, ABI floor and whether this machine can load it, judged as
`get_kernel` judges (by name, then by each variant's metadata.json: its ABI floor, GPU archs and
python-depends), and the verdict of its published `kbuild check-layers` record where it has one
(layer-checks/<variant>.json). Nothing is downloaded but the variants' metadata.json and records."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from kbuild.errors import HubUnreachable, InvalidRequest, KernelError, KernelNotFound
from kbuild.layer_check_record import UnreadableRecord, read_record
from kbuild.refs import KernelRef, check_repo_id, parse_request
from kbuild.repo_layout import layer_check, metadata_file
from kbuild.variants import detect_system
from kbuild_common.errors import UsageError

if TYPE_CHECKING:
    from kbuild.hub_loader import Session


def kernel_info(session: Session, request: str, backend: str | None = None) -> dict:
    """The record of ORG/NAME[@REV] `request`: repo, hub, revision, commit, versions (branch ->
    commit), system, and variants (one row each; `loads` marks the one get_kernel loads)."""


    repo_id, refs, versions, ref = _pin(session, request)
    system = detect_system(backend)
    found = session.judge_metadata(session.resolve(ref, system), every=True)
    rows = []
    for c in found.trace:
        files = session.reader.files(repo_id, found.commit, c.name)
        abi = session.floor(repo_id, found.commit, c.name)
        rows.append({"variant": c.name, "size": sum(f.size for f in files), "files": len(files),
                     "fits": c.accepted, "why": c.reason or c.note, "floor": (abi.manylinux or "") if abi else "",
                     "loads": c.name == found.chosen, "layers": _layer_check(session, repo_id, found.commit, c.name)})
    return {"repo": repo_id, "hub": session.reader.describe(), "revision": ref.revision, "commit": found.commit,
            "versions": {v: refs.branches[v] for v in versions}, "system": system.describe(), "variants": rows}


def _layer_check(session: Session, repo_id: str, commit: str, variant: str) -> dict | None:
    """{"checked": the verdict line, "differs": the first layer quantity that differs} of the
    variant's published record, read by the runtime's one reader; None when it has none (or offline)."""
    if session.offline:
        return None
    try:
        raw = session.reader.read_file(repo_id, commit, layer_check(variant))
    except (KernelNotFound, HubUnreachable):
        return None
    except KernelError as e:  # over the read limit, say
        return {"checked": f"layer check unreadable ({e})", "differs": ""}
    try:
        check = read_record(raw)
        meta = session.reader.read_file(repo_id, commit, metadata_file(variant))
    except (UnreadableRecord, KernelError) as e:
        return {"checked": f"layer check unreadable ({e})", "differs": ""}
    if check.metadata_sha256 != hashlib.sha256(meta).hexdigest():
        return {"checked": "layer check of another build (not of this metadata.json)", "differs": ""}
    return {"checked": check.verdict(), "differs": check.first_failure}


def variant_traces(session: Session, request: str, backend: str | None = None, all_versions: bool = False) -> dict:
    """`kbuild variants ORG/NAME[@REV]`: every variant at the requested revision (default: the
    newest vN; `all_versions`: each vN, newest first) judged as get_kernel judges it here, accepted
    best-first with the one it loads marked, then the rejected with the reason (kernels' `variants`
    trace). Only metadata.json is fetched."""
    if all_versions and "@" in request:
        raise UsageError(f"kbuild variants: --all-versions lists every vN; {request} names one revision")
    repo_id, refs, versions, ref = _pin(session, request)
    pins = [KernelRef(repo_id, v) for v in reversed(versions)] if all_versions else [ref]
    system = detect_system(backend)
    revisions = []
    for pin in pins:
        found = session.judge_metadata(session.resolve(pin, system), every=True)
        revisions.append({"revision": pin.revision, "commit": found.commit, "variants": [
            {"variant": c.name, "accepted": c.accepted, "reason": c.reason, "note": c.note,
             "loads": c.name == found.chosen} for c in found.trace]})
    return {"repo": repo_id, "hub": session.reader.describe(), "system": system.describe(), "revisions": revisions}


def _pin(session: Session, request: str):
    """(repo id, its refs, its vN branches oldest first, the ref `request` names or the newest vN)."""
    repo_id = request.partition("@")[0]
    try:
        check_repo_id(repo_id)
    except InvalidRequest as e:
        raise UsageError(str(e)) from None
    refs = session.refs(repo_id)  # RepoNotFound: "no kernel repo ... on ..." (a one-line error)
    versions = sorted((b for b in refs.branches if re.fullmatch(r"v\d+", b)), key=lambda b: int(b[1:]))
    if "@" in request:
        return repo_id, refs, versions, parse_request(request)
    if versions:
        return repo_id, refs, versions, KernelRef(repo_id, versions[-1])
    raise UsageError(f"{repo_id} on {session.reader.describe()} has no version branch (v1, v2, ...); "
                     f"name a branch or commit: {repo_id}@<branch>")
