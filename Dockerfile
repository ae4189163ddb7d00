# cronjob-operator: `docker build -t controller:latest .`
# Stage 1 builds a wheel and installs it with its pinned dependencies into a venv;
# stage 2 copies only that venv onto a slim base and runs as the non-root user 65532.
FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml README.md ./
COPY cronjob_operator ./cronjob_operator
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-compile . \
    && /opt/venv/bin/cronjob-operator version

FROM python:3.11-slim
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["cronjob-operator"]
