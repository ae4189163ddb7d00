# syntax=docker/dockerfile:1
# cronjob-operator: `docker build -t controller:latest .` (or hack/build-image.sh, buildah).
#
# Stage `build` installs the hash-locked dependencies (requirements.lock, written by
# hack/lock-requirements.sh from pyproject.toml) into a venv that has no pip, with
# `--require-hashes --no-deps`: nothing is resolved at build time and a file that differs
# from the one locked is refused. The project's wheel is built with the hash-locked
# build backend (requirements-build.lock) and installed with --no-deps; `pip check` then
# proves the lock complete. Stage `runtime-root` is the base without pip, ensurepip, the
# bundled wheels, apt or dpkg; the final stage starts from scratch with that root as one
# layer (so no lower layer still carries what was removed), adds the venv, and runs as
# the non-root user 65532.
#
# The base is pinned by digest: python:3.11-slim-bookworm as published in April 2024
# (Debian 12.5), the digest of a multi-arch index, so the one reference serves amd64 and
# arm64. A digest pulls exactly that content or fails; it was not verified from the
# machines this project is built on (no registry there). Refresh it, and re-check, with
#   skopeo inspect --format '{{.Digest}}' docker://docker.io/library/python:3.11-slim-bookworm
# Both stages use it, so the venv's interpreter link points at the same python3.
# hack/build-image.sh passes a base made from Debian packages instead on machines that
# reach no registry (CRONJOB_OPERATOR_PULL_BASE=1 pulls this one).
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm@sha256:6d2502238109c929569ae99355e28890c438cb11bc88ef02cd189c173b3db07c

FROM ${BASE_IMAGE} AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements.lock requirements-build.lock ./
# Behind a proxy or a private index, pass a pip configuration (index-url, credentials)
# and a CA bundle as build secrets; both are optional and never stored in a layer:
#   docker build --secret id=pip.conf,src=$HOME/.config/pip/pip.conf \
#                --secret id=ca.crt,src=/etc/ssl/certs/ca-certificates.crt .
RUN --mount=type=secret,id=pip.conf,required=false \
    --mount=type=secret,id=ca.crt,required=false \
    if [ -f /run/secrets/pip.conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip.conf; fi \
    && if [ -f /run/secrets/ca.crt ]; then export PIP_CERT=/run/secrets/ca.crt; fi \
    && python3 -m venv /opt/build \
    && python3 -m venv --without-pip /opt/venv \
    && /opt/build/bin/pip install --require-hashes --no-deps -r requirements-build.lock \
    && /opt/build/bin/pip --python /opt/venv/bin/python install --no-compile \
       --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY cronjob_operator ./cronjob_operator
# VERSION (hack/build-image.sh's second argument) stamps another version into the build
# (cronjob_operator.__version__, the wheel's, what `version` prints and the manager logs
# at start); empty keeps the tree's. Declared here, so the layers above stay cached.
ARG VERSION=""
RUN if [ -n "${VERSION}" ]; then \
      sed -i "s/^__version__ = .*$/__version__ = \"${VERSION}\"/" cronjob_operator/__init__.py; \
    fi \
    && /opt/build/bin/pip wheel --no-build-isolation --no-deps --wheel-dir /tmp/wheel . \
    && /opt/build/bin/pip --python /opt/venv/bin/python install --no-compile --no-deps \
       --no-index /tmp/wheel/cronjob_operator-*.whl \
    && /opt/build/bin/pip --python /opt/venv/bin/python check \
    && /opt/venv/bin/cronjob-operator version

FROM ${BASE_IMAGE} AS runtime-root
# apt (with libapt-pkg and debconf) and the venv tooling (ensurepip, the bundled wheels)
# are purged with dpkg, so /var/lib/dpkg/status (kept for image scanners) lists what is
# really there; then dpkg's own files go, and the python image's pip, setuptools, wheel
# and ensurepip. (openssl, which makes the self-signed metrics certificate, comes with
# ca-certificates and stays.)
RUN set -eu; \
    purge="$(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' \
      apt 'libapt-pkg*' debconf 'python3*-venv' 'python3-pip*' 'python3-setuptools*' 'python3-wheel*' 2>/dev/null \
      | awk '$1 == "ii" { print $2 }')"; \
    if [ -n "${purge}" ]; then dpkg --purge --force-remove-essential --force-remove-protected \
      --force-depends ${purge}; fi; \
    dpkg-query -L dpkg | while read -r path; do \
      case "${path}" in /var/lib/dpkg/*) ;; *) if [ ! -d "${path}" ]; then rm -f "${path}"; fi ;; esac; \
    done; \
    rm -rf /usr/local/bin/pip* /usr/local/bin/wheel /usr/local/bin/easy_install* \
      /usr/local/lib/python3*/site-packages/pip /usr/local/lib/python3*/site-packages/pip-* \
      /usr/local/lib/python3*/site-packages/setuptools* \
      /usr/local/lib/python3*/site-packages/wheel /usr/local/lib/python3*/site-packages/wheel-* \
      /usr/local/lib/python3*/site-packages/_distutils_hack \
      /usr/local/lib/python3*/site-packages/distutils-precedence.pth \
      /usr/local/lib/python3*/ensurepip /usr/lib/python3*/ensurepip /usr/share/python-wheels \
      /var/lib/apt /var/cache/apt /var/log/apt /etc/apt /var/cache/debconf; \
    python3 -c 'import ssl, zoneinfo'

FROM scratch
COPY --from=runtime-root / /
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["cronjob-operator"]
