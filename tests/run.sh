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
# The deploy tests (tests/deploy) build the image and run it, Compose and `podman kube play`:
# podman with runc, buildah, podman-compose, and debootstrap for the local base image (no
# registry is needed). They skip with the reason when no container engine works.
deploy_pkgs=""
for tool in podman:podman buildah:buildah runc:runc podman-compose:podman-compose \
        debootstrap:debootstrap; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || deploy_pkgs="$deploy_pkgs ${tool#*:}"
done
if [ -n "$deploy_pkgs" ]; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $deploy_pkgs >/dev/null
fi
if command -v npm >/dev/null 2>&1 && [ ! -d tests/compat/js/node_modules/kafkajs ]; then
    (cd tests/compat/js && npm install --no-audit --no-fund --silent)
fi

.venv/bin/ruff check .
.venv/bin/mypy broker raft
exec .venv/bin/python -m pytest -q "$@"
