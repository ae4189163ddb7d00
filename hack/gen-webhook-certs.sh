#!/usr/bin/env bash
# Make a CA and a webhook serving certificate with openssl, for running the webhooks
# without cert-manager: the manager outside the cluster (docs/webhooks.md) and the
# integration tests.
#
#   hack/gen-webhook-certs.sh DIR [NAME...]
#
# DIR gets ca.crt/ca.key (made on the first run, then reused) and tls.crt/tls.key (issued
# anew on every run and signed by that CA, so running it again rotates the serving
# certificate; the manager picks the new one up without a restart). The certificate is
# valid for 127.0.0.1, localhost and the webhook Service's in-cluster names; each NAME
# (a DNS name or an IP address) is added. Prints the CA bundle (base64 of ca.crt, for a
# clientConfig.caBundle) on stdout.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

CA_DAYS=365
CERT_DAYS=90
SERVICE_NAMES=(
  webhook-service.system.svc
  webhook-service.system.svc.cluster.local
  cronjob-operator-webhook-service.cronjob-operator-system.svc
  cronjob-operator-webhook-service.cronjob-operator-system.svc.cluster.local
)

# new_key FILE: an ECDSA P-256 private key, readable by its owner only.
new_key() {
  (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null)
}

# alt_names NAME...: the subjectAltName value for the default names plus NAMEs.
alt_names() {
  local names=("IP:127.0.0.1" "DNS:localhost") name
  for name in "${SERVICE_NAMES[@]}"; do names+=("DNS:${name}"); done
  for name in "$@"; do
    if [[ "${name}" =~ ^[0-9.]+$ || "${name}" == *:* ]]; then
      names+=("IP:${name}")
    else
      names+=("DNS:${name}")
    fi
  done
  local IFS=,
  echo "${names[*]}"
}

# make_ca DIR: ca.key and a self-signed ca.crt, unless both exist.
make_ca() {
  local dir="$1"
  if [[ -s "${dir}/ca.crt" && -s "${dir}/ca.key" ]]; then
    return 0
  fi
  log "creating a CA in ${dir}"
  new_key "${dir}/ca.key"
  openssl req -x509 -new -key "${dir}/ca.key" -sha256 -days "${CA_DAYS}" \
    -subj "/CN=cronjob-operator-webhook-ca" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "${dir}/ca.crt" 2>/dev/null
}

# issue DIR NAME...: a new tls.key and tls.crt signed by the CA, each moved into place
# whole (the manager may read the pair between the two moves; it keeps the old pair
# until both match).
issue() {
  local dir="$1" work
  shift
  work="$(mktemp -d "${dir}/.issue.XXXXXX")"
  trap 'rm -rf "${work}"; trap - RETURN' RETURN
  new_key "${work}/tls.key"
  printf '%s\n' \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" \
    "subjectAltName=$(alt_names "$@")" >"${work}/ext.cnf"
  openssl req -new -key "${work}/tls.key" -subj "/CN=cronjob-operator-webhook" \
    -out "${work}/tls.csr" 2>/dev/null
  openssl x509 -req -in "${work}/tls.csr" -CA "${dir}/ca.crt" -CAkey "${dir}/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -sha256 -days "${CERT_DAYS}" \
    -extfile "${work}/ext.cnf" -out "${work}/tls.crt" 2>/dev/null
  mv -f "${work}/tls.key" "${dir}/tls.key"
  mv -f "${work}/tls.crt" "${dir}/tls.crt"
  log "issued ${dir}/tls.crt for $(alt_names "$@")"
}

main() {
  if [[ $# -lt 1 || "$1" == -* ]]; then
    echo "usage: $(basename "$0") DIR [NAME...]" >&2
    exit 2
  fi
  local dir="$1"
  shift
  mkdir -p "${dir}"
  make_ca "${dir}"
  issue "${dir}" "$@"
  base64 <"${dir}/ca.crt" | tr -d '\n'
  echo
}

main "$@"
