"""Which HTTP hub answered: kbuild's own (`kbuild hub serve`, which names itself in a header on every
response, KBUILD_HUB_HEADER) or another (the Hugging Face Hub). What differs for a user: where a
repo's page is, and where a write token comes from. Used by the runtime's reader (kbuild/hubs/http.py)
and the publisher (builder/hub/http_backend.py); kbuild_hub/server/app.py sets the header.
"""

from __future__ import annotations

KBUILD_HUB_HEADER = "X-Kbuild-Hub"
KBUILD_HUB_VALUE = "kbuild hub serve"


def is_kbuild_hub(headers) -> bool:
    """Whether a response's headers (any mapping with .get) come from `kbuild hub serve`."""
    return headers is not None and headers.get(KBUILD_HUB_HEADER) == KBUILD_HUB_VALUE


def page_url(endpoint: str, repo_id: str, revision: str, kbuild_hub: bool) -> str:
    """A repo's web page at `revision`: kbuild's hub shows a kernel at /ORG/NAME (its newest version
    and each version's variants), the Hugging Face Hub a kernel repo's files at /kernels/ORG/NAME/tree/REV."""
    if kbuild_hub:
        return f"{endpoint}/{repo_id}"
    return f"{endpoint}/kernels/{repo_id}/tree/{revision}"


def token_hint(kbuild_hub: bool, write: bool = True) -> str:
    """Where a token for this hub comes from."""
    if kbuild_hub:
        return ("this hub (kbuild hub serve) takes its tokens from its token file, not from a Hugging Face login: "
                "HF_TOKEN=$(cat ROOT/.token), ROOT being the folder it serves (~/.cache/kbuild/hub by default), "
                "or HF_TOKEN=$(cat FILE) for the file given to its --token-file")
    return "set HF_TOKEN to a token that can " + ("write to" if write else "read") + " it, or run `hf auth login`"


def unreachable_hint(argument: str = "--hub") -> str:
    """What to do when nothing answers at a hub's address (`argument`: what names the hub where the
    call was made, `--hub` or `hub=`)."""
    return (f"is the hub running? Start one with `kbuild hub serve`, or check its address: {argument}, else "
            "KBUILD_HUB, else HF_ENDPOINT")
