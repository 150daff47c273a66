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
# iproute2 (ip netns) and nftables build the network-partition harness
# (tests/chaos/test_partitions.py); it needs root, so without root it skips and nothing is installed.
if [ "$(id -u)" = 0 ] && ! { command -v ip && command -v nft; } >/dev/null 2>&1; then
    apt-get update -qq >/dev/null && apt-get install -y -qq iproute2 nftables >/dev/null
fi
if command -v npm >/dev/null 2>&1 && [ ! -d tests/compat/js/node_modules/kafkajs ]; then
    (cd tests/compat/js && npm install --no-audit --no-fund --silent)
fi

.venv/bin/ruff check .
.venv/bin/mypy broker raft
exec .venv/bin/python -m pytest -q "$@"
