#!/usr/bin/env bash
# Builds the Skiff image from the repository's Dockerfile, with docker or podman, on hosts
# where the plain `podman build` fails: cgroups v1 (crun refuses hybrid mode) or no
# reachable registry for the base image.
#
#   deploy/docker/build.sh [TAG]        # default skiff:latest
#
# Environment:
#   ENGINE=docker|podman   which engine (default: docker if its daemon answers, else podman)
#   PYTHON_IMAGE           the base image (default python:3.11-slim-bookworm, the Dockerfile's)
#   LOCAL_BASE=1           with podman, make the base image locally (base_image.sh, needs root
#                          and debootstrap) instead of pulling it; done anyway when the pull fails
#   SKIFF_COMPILE=0        a plain-Python image: no C compiler in the build stage, nothing
#                          compiled (default 1: the modules of broker/native.py compiled)
#   PIP_INDEX_URL, PIP_CERT  passed to the build (a package mirror, a CA file pip trusts); when
#                          PIP_CERT is unset and /etc/ssl/certs/ca-certificates.crt exists, that
#                          file is mounted and used, so a host behind a TLS proxy builds as is
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
TAG=${1:-skiff:latest}
PYTHON_IMAGE=${PYTHON_IMAGE:-python:3.11-slim-bookworm}
HOST_CA=/etc/ssl/certs/ca-certificates.crt

if [ -z "${ENGINE:-}" ]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        ENGINE=docker
    elif command -v podman >/dev/null 2>&1; then
        ENGINE=podman
    else
        echo "build.sh: neither a running docker nor podman found (apt-get install podman)" >&2
        exit 1
    fi
fi

args=(build -t "$TAG" --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE")
[ -n "${PIP_INDEX_URL:-}" ] && args+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL")
[ -n "${SKIFF_COMPILE:-}" ] && args+=(--build-arg "SKIFF_COMPILE=$SKIFF_COMPILE")

case "$ENGINE" in
docker)
    # docker build cannot mount a host file into the build: a proxy CA goes in via PIP_CERT
    # pointing at a file inside the build context, or a PIP_INDEX_URL mirror.
    [ -n "${PIP_CERT:-}" ] && args+=(--build-arg "PIP_CERT=$PIP_CERT")
    exec docker "${args[@]}" "$repo"
    ;;
podman)
    export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}
    # --format docker keeps the HEALTHCHECK (OCI images have no field for it);
    # --isolation chroot runs the RUN steps without an OCI runtime, so no cgroups are needed.
    args+=(--format docker --isolation chroot --network host)
    if [ -n "${PIP_CERT:-}" ]; then
        args+=(-v "$PIP_CERT:$PIP_CERT:ro" --build-arg "PIP_CERT=$PIP_CERT")
    elif [ -f "$HOST_CA" ]; then
        args+=(-v "$HOST_CA:$HOST_CA:ro" --build-arg "PIP_CERT=$HOST_CA")
    fi
    base=$PYTHON_IMAGE
    case "$base" in */*) ;; *) base="docker.io/library/$base" ;; esac
    if ! podman image exists "$base"; then
        if [ "${LOCAL_BASE:-0}" != 1 ] && timeout 120 podman pull -q "$base" >/dev/null 2>&1; then
            :
        else
            echo "build.sh: making $base locally (no registry reachable or LOCAL_BASE=1)" >&2
            bash "$here/base_image.sh" "$base"
        fi
    fi
    args+=(--pull=never)
    exec podman "${args[@]}" "$repo"
    ;;
*)
    echo "build.sh: ENGINE must be docker or podman, not '$ENGINE'" >&2
    exit 1
    ;;
esac
