#!/usr/bin/env bash
# Lock what the image installs, with hashes, from pyproject.toml (its one source):
#
#   requirements.lock        [project] dependencies and everything they pull in
#   requirements-build.lock  [build-system] requires: what builds the project's wheel
#
#   hack/lock-requirements.sh            after changing a pin in pyproject.toml
#   hack/lock-requirements.sh --upgrade  also move the indirect dependencies to their newest
#
# Commit both files. Arguments are passed to pip-compile; without --upgrade, what the locks
# already pin stays unless pyproject.toml requires otherwise.
#
# The Dockerfile installs both with `pip install --require-hashes --no-deps`, so nothing
# is resolved at build time and a file on the index that changed is refused.
# tests/unit/test_requirements_lock.py fails while a pin of pyproject.toml differs from
# the lock. The resolution is the one of the image: CPython 3.11 on linux x86_64 (run
# this with a python3.11 on such a machine). The hashes are those of every file the
# index has for each pinned version, so the same lock installs on linux/arm64 too (pip
# takes the aarch64 wheels); re-running this script on an arm64 machine must give the
# same files, and if it ever does not (a dependency with a platform marker), keep one
# lock per architecture.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

PIP_TOOLS_VERSION=7.6.2
IMAGE_PYTHON=3.11
IMAGE_MACHINE=x86_64

# image_python: the path of a CPython ${IMAGE_PYTHON} on ${IMAGE_MACHINE} (the image's).
image_python() {
  local candidate
  for candidate in "python${IMAGE_PYTHON}" python3; do
    command -v "${candidate}" >/dev/null || continue
    if "${candidate}" -c "import platform, sys; sys.exit(platform.python_version().rpartition('.')[0] != '${IMAGE_PYTHON}' or platform.machine() != '${IMAGE_MACHINE}')"; then
      command -v "${candidate}"
      return 0
    fi
  done
  log "no python${IMAGE_PYTHON} on ${IMAGE_MACHINE} here: the lock is resolved for the image's interpreter"
  return 1
}

# tool_venv: a venv with pip-tools ${PIP_TOOLS_VERSION}, kept in the cache.
tool_venv() {
  local dir
  dir="$(cache_root)/pip-tools-${PIP_TOOLS_VERSION}-py${IMAGE_PYTHON}"
  if [[ ! -x "${dir}/bin/pip-compile" ]]; then
    log "installing pip-tools==${PIP_TOOLS_VERSION} into ${dir}"
    "$(image_python)" -m venv "${dir}" >&2
    "${dir}/bin/python" -m pip install --quiet "pip-tools==${PIP_TOOLS_VERSION}" >&2
  fi
  echo "${dir}"
}

main() {
  local tools
  tools="$(tool_venv)"
  # Only the index's files are hashed: a local wheel directory would add hashes that no
  # other machine can match.
  unset PIP_FIND_LINKS
  export CUSTOM_COMPILE_COMMAND="hack/lock-requirements.sh"
  local common=(--quiet --generate-hashes --allow-unsafe --strip-extras --newline=lf
    --no-emit-index-url --no-emit-find-links --no-emit-trusted-host --rebuild)
  log "locking [project] dependencies into requirements.lock"
  "${tools}/bin/pip-compile" "${common[@]}" "$@" --output-file requirements.lock pyproject.toml
  log "locking [build-system] requires into requirements-build.lock"
  "${tools}/bin/pip-compile" "${common[@]}" --only-build-deps --build-deps-for=wheel \
    "$@" \
    --output-file requirements-build.lock pyproject.toml
}

main "$@"
