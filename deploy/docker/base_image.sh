#!/usr/bin/env bash
# Builds a local stand-in for the official `python:3.11-slim-bookworm` image, for machines
# that cannot reach a container registry (CI here). The Dockerfile keeps its standard FROM;
# this only provides an image under that name: a Debian bookworm rootfs (debootstrap
# minbase) whose python3 is 3.11, with /usr/local/bin/python{,3} pointing at it, as in the
# official image.
#
# Usage: base_image.sh [TAG]   (default python:3.11-slim-bookworm); deploy/docker/build.sh calls it
# Cache: $SKIFF_DEPLOY_CACHE (default ~/.cache/skiff-deploy) keeps the rootfs tarball so a
# second run only re-imports it. Does nothing if the tag already exists in podman.
set -euo pipefail
TAG=${1:-docker.io/library/python:3.11-slim-bookworm}
CACHE=${SKIFF_DEPLOY_CACHE:-$HOME/.cache/skiff-deploy}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
TARBALL="$CACHE/python-3.11-slim-bookworm.rootfs.tar"

if podman image exists "$TAG"; then
    exit 0
fi
mkdir -p "$CACHE"
if [ ! -s "$TARBALL" ]; then
    work=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 \
        || { tail -30 "$work/debootstrap.log" >&2; exit 1; }
    root="$work/rootfs"
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python3"
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
    # What the official slim image trims: apt lists, docs, man pages, locales.
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
        "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
    tar -C "$root" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
fi
podman import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PYTHON_VERSION=3.11' \
    --change 'CMD ["python3"]' \
    "$TARBALL" "$TAG" >/dev/null
