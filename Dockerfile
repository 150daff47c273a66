# Skiff: a Kafka-compatible broker. `docker build -t skiff .`, then
#   docker run -p 9092:9092 skiff
# starts one combined broker+controller node that a client on the host reaches at
# localhost:9092. docs/deploy.md has every setting, Compose and Kubernetes.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: a virtualenv with the dependencies, the sources and their generated code
FROM ${PYTHON_IMAGE} AS build
# Where pip looks and which CA file it trusts, for builds behind a proxy or a mirror
# (unset: PyPI with pip's own CA bundle).
ARG PIP_INDEX_URL
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# A C compiler in this stage only: setup.py compiles broker/native.py's modules with mypyc
# and builds the native threads that send large Fetch answers (broker/protocol/_sendpool.c);
# the runtime stage gets what they compile, not the compiler. Python's headers come with
# the official image; python3-dev is installed only where they are missing (the local
# stand-in of deploy/docker/base_image.sh). SKIFF_COMPILE=0 builds a plain-Python image.
ARG SKIFF_COMPILE=1
# hadolint ignore=DL3008
RUN if [ "$SKIFF_COMPILE" != 0 ]; then \
        apt-get update \
        && apt-get install -y --no-install-recommends gcc libc6-dev \
        && { python -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
             || apt-get install -y --no-install-recommends python3-dev; } \
        && rm -rf /var/lib/apt/lists/*; \
    fi
RUN python -m venv /opt/skiff/venv
WORKDIR /opt/skiff/app
COPY pyproject.toml README.md setup.py ./
COPY proto ./proto
COPY raft ./raft
COPY broker ./broker
# An editable install: broker/util/protogen.py compiles proto/ next to the package, at build time
# here, so the running image never needs to write its own code.
# Then the extension modules lose their debug information (the compiled ones half their
# size; uvloop's, zstandard's and lz4's 90%, as their wheels ship it), the build its
# intermediate files, and zstandard its cffi backend, which CPython never loads beside the
# C one.
RUN /opt/skiff/venv/bin/pip install --no-compile -e . \
    && /opt/skiff/venv/bin/python -c "from broker.util import protogen; protogen.ensure()" \
    && if [ "$SKIFF_COMPILE" != 0 ]; then \
        find /opt/skiff -name '*.so*' -type f -exec strip --strip-debug {} +; \
    fi \
    && rm -rf /opt/skiff/app/build \
    && rm -f /opt/skiff/venv/lib/python*/site-packages/zstandard/_cffi.*.so \
        /opt/skiff/venv/lib/python*/site-packages/zstandard/backend_cffi.py \
    && /opt/skiff/venv/bin/python -m compileall -q -j 0 /opt/skiff/venv /opt/skiff/app \
    && find /opt/skiff/venv -depth -type d \( -name tests -o -name test \) \
        -path '*/site-packages/*' -exec rm -rf {} + \
    && rm -rf /opt/skiff/venv/lib/python*/site-packages/pip \
        /opt/skiff/venv/lib/python*/site-packages/setuptools /opt/skiff/venv/bin/pip*

# ---- runtime
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="skiff" \
      org.opencontainers.image.description="A Kafka-compatible streaming platform in Python" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 1000 skiff \
    && useradd --system --uid 1000 --gid skiff --home-dir /var/lib/skiff --no-create-home \
        --shell /usr/sbin/nologin skiff \
    && mkdir -p /var/lib/skiff /etc/skiff \
    && chown skiff:skiff /var/lib/skiff
COPY --from=build /opt/skiff /opt/skiff
COPY deploy/docker/server.properties /etc/skiff/server.properties
ENV PATH=/opt/skiff/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/var/lib/skiff
USER 1000:1000
WORKDIR /var/lib/skiff
VOLUME ["/var/lib/skiff"]
# Kafka clients, the controller quorum, the gRPC admin API (with grpc.health.v1), and
# Prometheus metrics
EXPOSE 9092 9093 9094 9095
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["skiff", "health", "--quiet"]
# The node is PID 1 itself: it handles SIGTERM/SIGINT with a controlled shutdown (its
# partition leaderships move away, logs are closed cleanly) and starts no child processes.
STOPSIGNAL SIGTERM
CMD ["skiff", "server", "start", "/etc/skiff/server.properties", "--auto-format"]
