"""The kernel repos an installed transformers maps by default, read from transformers itself (for
`kbuild hub mirror --transformers`, docs/upstream.md "Mirroring for air-gapped sites").

transformers is rarely installed beside kbuild, so the mapping is read by running this file as a
script with the Python of the environment that runs transformers (`--python PY`, default the
Python running kbuild). The script half imports only the standard library and transformers; the
caller half (`read`) runs it and reads the JSON it writes.

What counts as "mapped by default": the layers `kernelize` binds without the user naming a repo
(`transformers.integrations.hub_kernels.get_kernel_mapping_transformers()`, LayerRepository
entries per layer, device and mode) and the hub functions transformers loads by itself
(`hub_kernels._HUB_KERNEL_MAPPING`, `lazy_load_kernel`: FP8 and MoE kernels). A `version=N` is
asked of the hub as branch `vN` (as `kernels` resolves it); a revision as it is.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

TIMEOUT_S = 600  # importing transformers with torch is slow on a loaded machine, never this slow


# -- the script, run by the other Python: the standard library and transformers only --------------

def _revision(revision, version) -> str | None:
    if revision is not None:
        return str(revision)
    if version is None:
        return "v1"  # lazy_load_kernel's default when an entry names neither
    if isinstance(version, int) and not isinstance(version, bool):
        return f"v{version}"
    return None  # a version range (older `kernels`): no single branch to mirror


def _layer_repos(value):
    """Every repository object under one mapping entry: {device: repo | {mode: repo}}."""
    if isinstance(value, dict):
        for inner in value.values():
            yield from _layer_repos(inner)
    elif value is not None:
        yield value


_MODE_FLAGS = ("TRAINING", "INFERENCE", "TORCH_COMPILE", "FALLBACK")


def _layer_rows(name: str, entry) -> list[dict]:
    """One row per repository of a layer's entry: the kernel layer it names, the devices and the modes
    (`kernels`' Mode flags by name: TRAINING, INFERENCE, TORCH_COMPILE, FALLBACK) it is bound for."""
    rows: dict[tuple[str, str], dict] = {}
    for device, value in (entry.items() if isinstance(entry, dict) else ()):
        kind = getattr(device, "type", device)
        for mode, repo in (value.items() if isinstance(value, dict) else ((None, value),)):
            repo_id = getattr(repo, "_repo_id", None) or getattr(repo, "repo_id", None)
            layer = getattr(repo, "layer_name", None) or getattr(repo, "_layer_name", None)
            if not isinstance(repo_id, str) or not isinstance(layer, str):
                continue
            row = rows.setdefault((repo_id, layer), {"layer": name, "repo_id": repo_id, "kernel_layer": layer,
                                                     "devices": [], "modes": []})
            if str(kind) not in row["devices"]:
                row["devices"].append(str(kind))
            flags = ["FALLBACK"] if mode is None else [f for f in _MODE_FLAGS if f in str(mode)]
            row["modes"].extend(f for f in flags if f not in row["modes"])
    return list(rows.values())


def _read_mapping() -> dict:
    try:
        import transformers
        from transformers.integrations import hub_kernels
    except Exception as e:  # not installed, or broken: the caller says which Python to use instead
        return {"error": f"cannot import transformers ({type(e).__name__}: {e})", "missing": True}
    build = getattr(hub_kernels, "get_kernel_mapping_transformers", None)
    if build is None:
        return {"error": f"transformers {transformers.__version__} maps no hub kernels in this environment: "
                         "its `kernels` integration is off (kernels is not installed, or not a version this "
                         "transformers accepts)"}
    found: dict[tuple[str, str], list[str]] = {}
    skipped: list[str] = []

    def add(repo_id, revision, version, use: str) -> None:
        rev = _revision(revision, version)
        if not isinstance(repo_id, str) or rev is None:
            skipped.append(f"{use}: {repo_id!r} version {version!r}")
            return
        uses = found.setdefault((repo_id, rev), [])
        if use not in uses:
            uses.append(use)

    layers: list[dict] = []
    for name, entry in build().items():
        layers.extend(_layer_rows(name, entry))
        for repo in _layer_repos(entry):
            repo_id = getattr(repo, "_repo_id", None) or getattr(repo, "repo_id", None)
            if repo_id is None:  # a LocalLayerRepository: a folder, nothing on a hub
                continue
            add(repo_id, getattr(repo, "_revision", getattr(repo, "revision", None)),
                getattr(repo, "_version", getattr(repo, "version", None)), f"layer {name}")
    for name, entry in getattr(hub_kernels, "_HUB_KERNEL_MAPPING", {}).items():
        add(entry.get("repo_id"), entry.get("revision"), entry.get("version"), f"function {name}")
    return {"transformers": transformers.__version__, "python": sys.executable,
            "kernels": [{"repo_id": r, "revision": rev, "uses": uses} for (r, rev), uses in sorted(found.items())],
            "layers": layers, "skipped": skipped}


def _main(out: str) -> int:
    Path(out).write_text(json.dumps(_read_mapping()))
    return 0


# -- the caller, in kbuild ----------------------------------------------------------------------

def read(python: str, what: str = "--transformers", isolated: bool = True) -> dict:
    """{"transformers": version, "kernels": [{"repo_id", "revision", "uses"}], "layers": [{"layer", "repo_id",
    "kernel_layer", "devices", "modes"}], "skipped": [...]} from `python`'s transformers; UsageError naming
    --python when it has none. `what`: the option or command the errors begin with; `isolated`: that Python's
    own site-packages only (False: PYTHONPATH too, as the process that will import transformers sees it)."""
    # here, not at the top: the script half runs in a Python without kbuild
    from kbuild_common.errors import CommandError, UsageError  # noqa: PLC0415
    from kbuild_common.proc import run  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="kbuild-transformers-") as tmp:
        out = Path(tmp) / "mapping.json"
        # -I: the other environment's site-packages only, never this folder's or PYTHONPATH's
        try:
            # -P: not this folder first on the path either way (its modules are not the environment's)
            done = run([python, "-I" if isolated else "-P", __file__, str(out)], timeout=TIMEOUT_S, check=False,
                       what="reading transformers' kernel mapping")
        except CommandError as e:
            raise UsageError(f"--python: cannot run {python} ({e})") from None
        if done.returncode != 0 or not out.is_file():
            last = (done.stdout.strip().splitlines() or ["no output"])[-1]
            raise UsageError(f"{what}: {python} could not read transformers' kernel mapping "
                             f"(exit {done.returncode}: {last})")
        data = json.loads(out.read_text())
    if "error" in data:
        hint = ("pass --python with the Python of the environment that runs transformers "
                "(e.g. --python ~/venvs/serve/bin/python)") if data.get("missing") else None
        raise UsageError(f"{what}: {python}: {data['error']}", hint=hint)
    return data


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
