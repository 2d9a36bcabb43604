"""The Hugging Face environments the HF-compatibility tests run in: one venv per `kernels` release,
each with the transformers release that pins it, on torch 2.13.0's CPU build (Hugging Face's loader
takes a CUDA variant on any CUDA build of torch, GPU or not, so .venv's torch cannot test its CPU
paths).

They live in `.venv/hf-envs/<name>`, so they go with .venv: made once (ci/setup.sh runs this file,
a test session makes any that are missing) and remade only when a pin below changes.

    python tests/helpers/hf_envs.py [NAME ...]     # make or update them (all by default)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

from filelock import FileLock

ROOT = Path(__file__).resolve().parents[2]
HOME = ROOT / ".venv" / "hf-envs"
TORCH = "torch==2.13.0"

# transformers pins `kernels` by release (its `kernels` extra): 5.17 takes 0.16.x, which needs the
# separate kernels-data package; 5.21 takes 0.17.x; 5.23 and 5.24 take 0.18.x (5.24.0, the newest);
# 5.25 requires kernels>=0.19.1 outright and huggingface_hub>=2.4.0, which pip resolves from it.
PAIRS: dict[str, tuple[str, ...]] = {
    "kernels-0.16": ("kernels==0.16.2", "kernels-data==0.16.2", "transformers==5.17.0"),
    "kernels-0.17": ("kernels==0.17.2", "transformers==5.21.1"),
    "kernels-0.18": ("kernels==0.18.3", "transformers==5.24.0"),
    "kernels-0.19": ("kernels==0.19.1", "transformers==5.25.0", "huggingface_hub>=2.4.0"),
}


class EnvError(RuntimeError):
    """An environment could not be made (pip's tail in the message)."""


def client_env(endpoint: str, home) -> dict[str, str]:
    """The environment a Hugging Face client runs in for a test: this one without any HF, kernels or
    transformers setting of the caller's, talking to `endpoint` with a fresh cache under `home`."""
    import os

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING", "KERNELS_", "TRANSFORMERS_")) and k != "USE_HUB_KERNELS"}
    # No HF_HUB_DISABLE_TELEMETRY: with it kernels 0.17.2 sends a User-Agent ending in "; ", which
    # httpx refuses before any request leaves.
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_PROGRESS_BARS="1")
    return env


def requirements(name: str) -> tuple[str, ...]:
    return (TORCH, *PAIRS[name])


def python(name: str) -> Path:
    return HOME / name / "bin" / "python"


def ensure(name: str) -> Path:
    """The environment's python, made or remade first when its pins changed."""
    if name not in PAIRS:
        raise EnvError(f"unknown environment {name!r}: expected one of {', '.join(PAIRS)}")
    venv = HOME / name
    stamp = venv / "kbuild-pins.txt"
    wanted = "\n".join(requirements(name)) + "\n"
    HOME.mkdir(parents=True, exist_ok=True)
    # parallel sessions (or setup.sh and a test run) must not pip into one venv at once
    with FileLock(str(HOME / f"{name}.lock")):
        if stamp.is_file() and stamp.read_text() == wanted and python(name).is_file():
            return python(name)
        shutil.rmtree(venv, ignore_errors=True)  # a half-made or outdated one: pip would keep its leftovers
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = subprocess.run([str(python(name)), "-m", "pip", "install", "-q", *requirements(name)],
                             capture_output=True, text=True)
        if pip.returncode != 0:
            tail = (pip.stdout + pip.stderr).strip().splitlines()[-15:]
            raise EnvError(f"pip install {' '.join(requirements(name))} into {venv} failed:\n" + "\n".join(tail))
        stamp.write_text(wanted)  # last: a killed install is remade next time
    return python(name)


def main(argv: list[str]) -> int:
    for name in argv or list(PAIRS):
        started = time.monotonic()
        try:
            made = ensure(name)
        except EnvError as e:
            print(f"tests/helpers/hf_envs.py: {e}", file=sys.stderr)
            return 1
        print(f"{name}: {made} ({' '.join(requirements(name))}; {time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
