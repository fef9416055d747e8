#!/usr/bin/env bash
# Lint and format check (README command 2 and .ci/run run it before the tests): ruff's rules and
# formatter as pyproject.toml configures them. `.venv/bin/ruff check --fix . && .venv/bin/ruff
# format .` repairs most findings; the pre-commit hook (.pre-commit-config.yaml) runs the same.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .
# types: the packages pyproject.toml's [tool.mypy] lists (files =)
.venv/bin/mypy
