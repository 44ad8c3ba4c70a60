#!/usr/bin/env bash
# The static checks, in seconds: ruff (lint and import order), mypy (types, at the strictness
# pyproject.toml states) and import-linter (the layer contracts in pyproject.toml).
# tests/run.sh runs them before any test; alone: bash tests/check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin
"$py/ruff" check broker controller protocol tests compat
"$py/mypy"
"$py/lint-imports" --no-cache --no-logo
