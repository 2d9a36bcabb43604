"""`kbuild info ORG/NAME[@REV]`: what a hub holds for a kernel, read through the runtime's own
hub readers (a local git hub or an HTTP hub, by the one hub rule): its versions, and at the
requested one (default: the newest vN) each variant with its size, ABI floor and whether this
machine can load it — the variant `get_kernel` would load is marked. Nothing is downloaded but
the variants' metadata.json.

    kbuild info kbuild/activation            # the newest version
    kbuild info kbuild/activation@v1 --json
"""

from __future__ import annotations

import json
import re

from kbuild.errors import InvalidRequest, KernelError
from kbuild.hub_loader import Session
from kbuild.refs import KernelRef, check_repo_id, parse_request
from kbuild.settings import from_environment

from builder.errors import KbuildError, UsageError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("info", help="a hub's versions and variants of a kernel, and the one this machine loads")
    p.add_argument("repo", metavar="ORG/NAME[@REV]", help="the kernel; @v2, @<branch>, @<sha> (default: the newest vN)")
    p.add_argument("--hub", default=None,
                   help="a folder/file:// (local hub) or http(s):// URL (default: $KBUILD_HUB, else $HF_ENDPOINT, "
                        "else ~/.cache/kbuild/hub)")
    p.add_argument("--backend", default=None, help="judge the variants for this backend (e.g. cpu)")
    p.add_argument("--json", action="store_true", help="print a machine-readable record")
    p.set_defaults(handler=_info)


def _info(args, reporter) -> int:
    try:
        return _show(args, reporter)
    except KernelError as e:  # the runtime's errors (no such repo, revision, hub) as one line
        raise KbuildError(str(e)) from None


def _show(args, reporter) -> int:
    from kbuild.variants import detect_system

    from builder.report import human_size

    settings = from_environment()  # the runtime's reading (the one hub rule); its Session takes it
    session = Session(args.hub or settings.hub, settings)
    repo_id = args.repo.partition("@")[0]
    try:
        check_repo_id(repo_id)
    except InvalidRequest as e:
        raise UsageError(str(e)) from None
    refs = session.refs(repo_id)  # RepoNotFound: "no kernel repo ... on ..." (a one-line error)
    versions = sorted((b for b in refs.branches if re.fullmatch(r"v\d+", b)), key=lambda b: int(b[1:]))
    if "@" in args.repo:
        ref = parse_request(args.repo)
    elif versions:
        ref = KernelRef(repo_id, versions[-1])
    else:
        raise UsageError(f"{repo_id} on {session.reader.describe()} has no version branch (v1, v2, ...); "
                         f"name a branch or commit: {repo_id}@<branch>")
    system = detect_system(args.backend)
    # judged as get_kernel judges: by name, then by each variant's metadata.json (its ABI floor,
    # GPU archs and python-depends, kbuild.fit) on this host
    found = session.judge_metadata(session.resolve(ref, system), every=True)
    rows = []
    for c in found.trace:
        files = session.reader.files(repo_id, found.commit, c.name)
        abi = session.floor(repo_id, found.commit, c.name)
        rows.append({"variant": c.name, "size": sum(f.size for f in files), "files": len(files),
                     "fits": c.accepted, "why": c.reason or c.note, "floor": (abi.manylinux or "") if abi else "",
                     "loads": c.name == found.chosen})
    record = {"repo": repo_id, "hub": session.reader.describe(), "revision": ref.revision, "commit": found.commit,
              "versions": {v: refs.branches[v] for v in versions}, "system": system.describe(), "variants": rows}
    if args.json:
        reporter.result(json.dumps(record, indent=2))
        return 0
    reporter.result(f"{repo_id} on {record['hub']}")
    listed = ", ".join(f"{v} ({sha[:12]})" for v, sha in record["versions"].items()) or "none"
    reporter.result(f"versions: {listed}")
    reporter.result(f"{ref.revision} = commit {found.commit[:12]}; this machine: {system.describe()}")
    width = max((len(r["variant"]) for r in rows), default=0)
    for r in rows:
        mark = "<- get_kernel loads this" if r["loads"] else ("fits" if r["fits"] else f"rejected ({r['why']})")
        if r["fits"] and r["why"]:  # why it ranks where it does, or what its checks noted
            mark += f" ({r['why']})"
        floor = f"  {r['floor']}" if r["floor"] else ""
        reporter.result(f"  {r['variant']:<{width}}  {human_size(r['size']):>8}  {mark}{floor}")
    if not rows:
        reporter.result(f"  (no build/ folder at {found.commit[:12]}: nothing was published there)")
    return 0

