#!/usr/bin/env bash
# Build the operator's image from the Dockerfile with buildah (no daemon) into the local
# containers store, and save it as an archive for `ctr images import` / `docker load`.
#
#   hack/build-image.sh [NAME]        default controller:latest (what config/manager uses)
#   hack/build-image.sh NAME VERSION  the same build with VERSION stamped in (the
#                                     Dockerfile's VERSION argument: what the manager
#                                     reports), e.g. two versions for an upgrade test
#
# Prints two lines on stdout: the image name and the archive's path
# (${CRONJOB_OPERATOR_CACHE:-~/.cache/cronjob-operator}/images/<image id>.tar, reused
# while the image is unchanged; archives of other builds are removed after a day). Installs buildah and runc from Debian when missing.
#
# The Dockerfile pins its base by digest (its BASE_IMAGE default). No container registry
# is reachable on the machines this project is built on, so unless
# CRONJOB_OPERATOR_PULL_BASE is set the build gets --build-arg BASE_IMAGE=${LOCAL_BASE}:
# a base made from Debian packages with mmdebstrap (python3, python3-venv,
# ca-certificates, tzdata, netbase, openssl; apt checks them against Debian's signed
# archive), made once and reused. With CRONJOB_OPERATOR_PULL_BASE=1 the pinned digest is
# pulled (once) and built from. A digest cannot name a local image, so the Debian base
# has a name of its own and is never taken for the pinned one. The build reaches the
# package index through the host's network, with the host's CA bundle and pip
# configuration passed as build secrets (never stored in a layer), so a TLS-inspecting
# proxy or a private index works as on the host; pip installs only the hash-locked files
# of requirements*.lock (hack/lock-requirements.sh).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

NAME="${1:-controller:latest}"
VERSION="${2:-}"
BASE_PACKAGES="python3,python3-venv,ca-certificates,tzdata,netbase,openssl"
LOCAL_BASE="localhost/cronjob-operator-base:bookworm"

# pinned_base: the BASE_IMAGE default of the Dockerfile (its one place).
pinned_base() {
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

# ensure_base: print the base to build from, pulling or making it when it is missing.
ensure_base() {
  local base="${LOCAL_BASE}"
  if [[ -n "${CRONJOB_OPERATOR_PULL_BASE:-}" ]]; then
    base="$(pinned_base)"
    [[ "${base}" == *@sha256:* ]] || { log "the Dockerfile has no ARG BASE_IMAGE=<name>@sha256:<digest> line"; return 1; }
  fi
  if ! image_exists "${base}"; then
    if [[ -n "${CRONJOB_OPERATOR_PULL_BASE:-}" ]]; then
      buildah pull --quiet "${base}" >/dev/null
    else
      make_debian_base "${base}" >&2
    fi
  fi
  echo "${base}"
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

# build BASE: the image, from BASE.
build() {
  local base="$1" secrets
  mapfile -t secrets < <(secret_args)
  log "building ${NAME}${VERSION:+ (version ${VERSION})} from ${base} (buildah bud --pull=never --network=host --isolation=chroot)"
  buildah bud --quiet --layers --pull=never --network=host --isolation=chroot \
    "${secrets[@]}" --build-arg "BASE_IMAGE=${base}" --build-arg "VERSION=${VERSION}" \
    --tag "${NAME}" --file Dockerfile . >/dev/null
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
  local base
  ensure_commands buildah=buildah runc=runc
  base="$(ensure_base)"
  build "${base}"
  echo "${NAME}"
  save_archive
}

main
