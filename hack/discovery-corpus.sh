#!/usr/bin/env bash
# Harvests the discovery benchmark's corpus: the tools/list of the MCP servers others
# wrote, pinned in test/mcp-peers/corpus/package-lock.json, written to $1 (default
# bin/discovery-corpus.json). The definitions are third-party prose: the corpus is made
# at bench time and never committed. Installs the servers first when their lockfile
# changed (a stamp in node_modules records its hash).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${ROOT}/test/mcp-peers/corpus"
OUT="${1:-${ROOT}/bin/discovery-corpus.json}"
STAMP="${DIR}/node_modules/.cantus-corpus.stamp"

for tool in node npm; do
  command -v "${tool}" >/dev/null 2>&1 || { echo "discovery-corpus: ${tool} is not on PATH (Node.js >= 20 and npm are required)" >&2; exit 1; }
done
hash="$(sha256sum "${DIR}/package-lock.json" | cut -d' ' -f1)"
if [[ ! -f "${STAMP}" || "$(cat "${STAMP}")" != "${hash}" ]]; then
  echo "discovery-corpus: npm ci in ${DIR}" >&2
  (cd "${DIR}" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2)
  echo "${hash}" >"${STAMP}"
fi
mkdir -p "$(dirname "${OUT}")"
node "${DIR}/harvest.mjs" "${OUT}"
echo "${OUT}"
