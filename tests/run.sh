#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine, then runs it.
# Used by the README's quick start and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# kcat (Debian) and kafkajs (npm) are real clients the compat tests drive.
if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq >/dev/null && apt-get install -y -qq kcat >/dev/null
    else
        sudo apt-get update -qq >/dev/null && sudo apt-get install -y -qq kcat >/dev/null
    fi
fi
# openssl (Debian's default install has it) makes the CA and certificates of the TLS tests.
if ! command -v openssl >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq >/dev/null && apt-get install -y -qq openssl >/dev/null
    else
        sudo apt-get update -qq >/dev/null && sudo apt-get install -y -qq openssl >/dev/null
    fi
fi
if command -v npm >/dev/null 2>&1 && [ ! -d tests/compat/js/node_modules/kafkajs ]; then
    (cd tests/compat/js && npm install --no-audit --no-fund --silent)
fi

.venv/bin/ruff check .
.venv/bin/mypy broker raft
exec .venv/bin/python -m pytest -q "$@"
