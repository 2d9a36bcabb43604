"""Where a variant's files are in a kernel's hub repo (docs/formats.md, "Signatures" and "Hub
repository layout"): the one rule publishers, loaders, hub fronts and mirrors follow.

`build/<variant>/` holds the variant folder as built. kbuild's SSH signature over its metadata.json
is published outside it, as `signatures/<variant>/metadata.json.sig`: Hugging Face's `kernels`
0.18 and later check on every load that each file of `build/<variant>/` is in metadata.json's
digest, sparing only metadata.json and their own `metadata.json.sigstore`, so a signature inside
the folder makes them refuse the variant. A fetched variant folder holds the signature beside its
metadata.json again, where the checks read it (kbuild/signatures/check.py). For the same reason
the variant's latest `kbuild check-layers` record is published as `layer-checks/<variant>.json`
(docs/formats.md, "Layer checks"); no loader fetches it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .digest import METADATA
from .signatures.ssh import SIGNATURE

BUILD = "build"
BUILD_PREFIX = BUILD + "/"  # every variant's folder is under it, and nothing else is
SIGNATURES = "signatures"  # top-level: kernels lists variants as the folders under build/ only
LAYER_CHECKS = "layer-checks"  # top-level too: one file a variant, `kbuild check-layers`' record


def variant_folder(variant: str) -> str:
    """The variant's folder: `build/<variant>` (messages name a variant by it too)."""
    return BUILD_PREFIX + variant


def variant_prefix(variant: str) -> str:
    return variant_folder(variant) + "/"


def metadata_file(variant: str) -> str:
    """Where the variant's metadata.json is published: the one file a loader reads before choosing."""
    return variant_prefix(variant) + METADATA


def signature_folder(variant: str) -> str:
    return f"{SIGNATURES}/{variant}"


def ssh_signature(variant: str) -> str:
    """Where the variant's SSH signature is published."""
    return f"{signature_folder(variant)}/{SIGNATURE}"


def layer_check(variant: str) -> str:
    """Where the variant's layer check record is published."""
    return f"{LAYER_CHECKS}/{variant}.json"


def owned_prefixes(variant: str) -> tuple[str, ...]:
    """What a publish of the variant replaces: its folder and its signature's folder (prefixes,
    ending in `/`) and its layer check (a path: `owns` tells them apart)."""
    return variant_prefix(variant), signature_folder(variant) + "/", layer_check(variant)


def owns(owned: Iterable[str], path: str) -> bool:
    """Whether `path` is one of `owned`'s paths or under one of its folders (`owned_prefixes`)."""
    return any(path == o or (o.endswith("/") and path.startswith(o)) for o in owned)


def repo_path(variant: str, rel: str) -> str:
    """Where the file `rel` of a variant folder is published."""
    return ssh_signature(variant) if rel == SIGNATURE else variant_prefix(variant) + rel


def variant_of(path: str) -> str | None:
    """The variant a repo path belongs to (`build/<variant>/…`, or its SSH signature); None for
    anything else."""
    if (variant := folder_variant(path)) is not None:
        return variant
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == SIGNATURES and parts[1] and parts[2] == SIGNATURE:
        return parts[1]
    return None


def folder_variant(path: str) -> str | None:
    """The variant whose folder holds the file `path` (`build/<variant>/…`); None for anything else."""
    parts = path.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == BUILD and parts[1] else None


def listed_variants(folders: Iterable[str]) -> list[str]:
    """The variants among repo folder paths `folders`: each `build/<variant>` folder, sorted."""
    return sorted(p[len(BUILD_PREFIX):] for p in folders
                  if p.startswith(BUILD_PREFIX) and "/" not in p[len(BUILD_PREFIX):] and p != BUILD_PREFIX)


def variant_paths(variant: str, listed: Iterable[str]) -> dict[str, str]:
    """Repo path -> path in the fetched variant folder, for the variant's files among the repo
    paths `listed`: everything under `build/<variant>/`, and its SSH signature. Variants published
    before the signature moved hold it as `build/<variant>/metadata.json.sig`; that copy is read
    only when `signatures/<variant>/` has none, so those variants still verify."""
    listed = set(listed)
    prefix = variant_prefix(variant)
    found = {p: p[len(prefix):] for p in sorted(listed) if p.startswith(prefix)}
    if ssh_signature(variant) in listed:
        found.pop(prefix + SIGNATURE, None)
        found[ssh_signature(variant)] = SIGNATURE
    return found
