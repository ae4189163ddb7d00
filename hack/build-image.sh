#!/usr/bin/env bash
# Build the operator's image from the Dockerfile with buildah (no daemon) into the local
# containers store, and save it as an archive for `ctr images import` / `docker load`.
#
#   hack/build-image.sh [NAME]        default controller:latest (what config/manager uses)
#
# Prints two lines on stdout: the image name and the archive's path
# (${CRONJOB_OPERATOR_CACHE:-~/.cache/cronjob-operator}/images/<image id>.tar, reused
# while the image is unchanged; archives of other builds are removed after a day). Installs buildah and runc from Debian when missing.
#
# No container registry is reachable on the machines this project is built on, so when
# the Dockerfile's base image (its BASE_IMAGE default) is not in the store and
# CRONJOB_OPERATOR_PULL_BASE is unset, the base is made from Debian packages with
# mmdebstrap (python3, python3-venv, ca-certificates, tzdata, netbase, openssl) and
# stored under that name; later builds reuse it. With CRONJOB_OPERATOR_PULL_BASE=1 it
# is pulled instead. The build reaches the package index through the host's network,
# with the host's CA bundle and pip configuration passed as build secrets (never stored
# in a layer), so a TLS-inspecting proxy or a private index works as on the host.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

NAME="${1:-controller:latest}"
BASE_PACKAGES="python3,python3-venv,ca-certificates,tzdata,netbase,openssl"

# base_image_name: the BASE_IMAGE default of the Dockerfile (its one place).
base_image_name() {
  sed -n 's/^ARG BASE_IMAGE=\(.*\)$/\1/p' Dockerfile | head -n 1
}

image_exists() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# make_debian_base NAME: a Debian bookworm image with Python, from Debian's packages.
make_debian_base() {
  local name="$1" work container
  ensure_commands mmdebstrap=mmdebstrap
  work="$(mktemp -d)"
  log "making ${name} from Debian packages (mmdebstrap --variant=minbase bookworm: ${BASE_PACKAGES})"
  mmdebstrap --quiet --variant=minbase --include="${BASE_PACKAGES}" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "${work}/rootfs.tar" >&2
  container="$(buildah from scratch)"
  buildah add --quiet "${container}" "${work}/rootfs.tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 \
    --label "org.opencontainers.image.description=Debian bookworm minbase with ${BASE_PACKAGES}, made by hack/build-image.sh" \
    "${container}"
  buildah commit --quiet --rm "${container}" "${name}" >/dev/null
  rm -rf "${work}"
}

ensure_base() {
  local base
  base="$(base_image_name)"
  [[ -n "${base}" ]] || { log "the Dockerfile has no ARG BASE_IMAGE=<name> line"; return 1; }
  if image_exists "${base}"; then
    return 0
  fi
  if [[ -n "${CRONJOB_OPERATOR_PULL_BASE:-}" ]]; then
    buildah pull --quiet "${base}" >/dev/null
  else
    make_debian_base "${base}"
  fi
}

# secret_args: the host's pip configuration and CA bundle, as `--secret` flags.
secret_args() {
  local pip_conf ca candidate
  for candidate in "${PIP_CONFIG_FILE:-}" "${HOME}/.config/pip/pip.conf" "${HOME}/.pip/pip.conf" /etc/pip.conf; do
    [[ -n "${candidate}" && -f "${candidate}" ]] && { pip_conf="${candidate}"; break; }
  done
  for candidate in "${PIP_CERT:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
    [[ -n "${candidate}" && -f "${candidate}" ]] && { ca="${candidate}"; break; }
  done
  [[ -n "${pip_conf:-}" ]] && echo "--secret=id=pip.conf,src=${pip_conf}"
  [[ -n "${ca:-}" ]] && echo "--secret=id=ca.crt,src=${ca}"
  return 0
}

build() {
  local secrets
  mapfile -t secrets < <(secret_args)
  log "building ${NAME} (buildah bud --pull=never --network=host --isolation=chroot)"
  buildah bud --quiet --layers --pull=never --network=host --isolation=chroot \
    "${secrets[@]}" --tag "${NAME}" --file Dockerfile . >/dev/null
}

# save_archive: a docker-archive of the image; a bare name is saved as
# docker.io/library/<name>, which is what a kubelet resolves `image: <name>` to.
save_archive() {
  local id dir archive reference
  id="$(buildah inspect --type image --format '{{.FromImageID}}' "${NAME}")"
  dir="$(cache_root)/images"
  archive="${dir}/${id:0:20}.tar"
  case "${NAME}" in
    */*) reference="${NAME}" ;;
    *) reference="docker.io/library/${NAME}" ;;
  esac
  if [[ ! -s "${archive}" ]]; then
    mkdir -p "${dir}"
    # A partial file per process: concurrent builds of one image (hack/ci-under-load.sh's
    # CONCURRENT=1) each write their own and rename it into place, which is atomic.
    buildah push --quiet "${NAME}" "docker-archive:${archive}.partial.$$:${reference}" >/dev/null
    mv -f "${archive}.partial.$$" "${archive}"
    # Older builds, once a day old: a run of another commit may still be importing its own.
    find "${dir}" -maxdepth 1 -name '*.tar' ! -path "${archive}" -mtime +0 -delete
  fi
  echo "${archive}"
}

main() {
  ensure_commands buildah=buildah runc=runc
  ensure_base
  build
  echo "${NAME}"
  save_archive
}

main
