# syntax=docker/dockerfile:1
# cronjob-operator: `docker build -t controller:latest .` (or hack/build-image.sh, buildah).
# Stage 1 builds a wheel and installs it with its pinned dependencies into a venv, then
# drops pip and setuptools from it; stage 2 copies only that venv onto the same base and
# runs as the non-root user 65532.
#
# The base is pinned by its Debian release (a `-bookworm` tag, not the moving `-slim`);
# both stages use it, so the venv's interpreter link points at the same python3.
# hack/build-image.sh reads this default and, when no registry is reachable, makes an
# image of that name from Debian packages.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md ./
COPY cronjob_operator ./cronjob_operator
# Behind a proxy or a private index, pass a pip configuration (index-url, credentials)
# and a CA bundle as build secrets; both are optional and never stored in a layer:
#   docker build --secret id=pip.conf,src=$HOME/.config/pip/pip.conf \
#                --secret id=ca.crt,src=/etc/ssl/certs/ca-certificates.crt .
RUN --mount=type=secret,id=pip.conf,required=false \
    --mount=type=secret,id=ca.crt,required=false \
    if [ -f /run/secrets/pip.conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip.conf; fi \
    && if [ -f /run/secrets/ca.crt ]; then export PIP_CERT=/run/secrets/ca.crt; fi \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-compile . \
    && /opt/venv/bin/pip uninstall --yes pip setuptools \
    && /opt/venv/bin/cronjob-operator version

FROM ${BASE_IMAGE}
# The base's own pip and setuptools are build tools: the runtime carries no installer.
# (openssl, which makes the self-signed metrics certificate, comes with ca-certificates.)
RUN rm -rf /usr/local/bin/pip* /usr/local/lib/python3*/site-packages/pip* \
    /usr/local/lib/python3*/site-packages/setuptools* /usr/share/python-wheels
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["cronjob-operator"]
