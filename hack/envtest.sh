#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver, etcd) from the Go module proxy,
# because the usual envtest download site cannot be reached here. Binaries are cached
# under bin/k8s/<version>; a warm run only checks they are there.
# The last line printed is the folder to export as KUBEBUILDER_ASSETS.
# `hack/envtest.sh node` also builds kubelet, kube-controller-manager, kube-scheduler and
# kube-proxy the same way, for hack/cluster.sh.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${ROOT}/bin/k8s/${K8S_VERSION}-linux-amd64"
STAGING_VERSION="v0.${K8S_VERSION#*.}"

log() { echo "envtest: $*" >&2; }

# build_k8s builds the given k8s.io/kubernetes commands (kube-apiserver, kubelet, ...) from one
# throwaway main module, so the node binaries share the API server's build cache.
build_k8s() {
  local work; work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  log "building $* v${K8S_VERSION} (kube-apiserver alone is about 11 minutes cold on 2 cores)"
  local gomod
  gomod="$(cd "${work}" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module cantus.dev/envtest-build"
    echo "go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//')"
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    # k8s.io/kubernetes points its staging modules at ./staging; swap in their published versions.
    grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "${gomod}" | awk -v v="${STAGING_VERSION}" '{print "replace " $1 " => " $1 " " v}'
  } > "${work}/go.mod"
  local pkgs=() cmd
  {
    printf '//go:build tools\n\npackage tools\n\n'
    for cmd in "$@"; do
      printf 'import _ "k8s.io/kubernetes/cmd/%s"\n' "${cmd}"
      pkgs+=("k8s.io/kubernetes/cmd/${cmd}")
    done
  } > "${work}/tools.go"
  (cd "${work}" && go mod tidy -e >/dev/null 2>&1 || true)
  # Build into a scratch folder and move in at the end, so an interrupted build never
  # leaves a half-written binary that the next run would take as cached.
  mkdir -p "${work}/out"
  (cd "${work}" && GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#*.}" \
    -o "${work}/out/" "${pkgs[@]}")
  mv "${work}"/out/* "${DEST}/"
}

build_etcd() {
  local work; work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  log "building etcd v${ETCD_VERSION}"
  # etcd's own go.mod has replace directives, so `go install mod@version` refuses it;
  # a throwaway main module that requires it builds the same binary.
  printf 'module cantus.dev/etcd-build\ngo %s\nrequire go.etcd.io/etcd/server/v3 v%s\n' \
    "$(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//')" "${ETCD_VERSION}" > "${work}/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "${work}/tools.go"
  (cd "${work}" && GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true)
  (cd "${work}" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "${DEST}/etcd" go.etcd.io/etcd/server/v3)
}

link_kubectl() {
  if command -v kubectl >/dev/null 2>&1; then
    ln -sf "$(command -v kubectl)" "${DEST}/kubectl"
  else
    log "kubectl not on PATH; building it from k8s.io/kubernetes v${K8S_VERSION}"
    GOBIN="${DEST}" go install -trimpath -ldflags "-s -w" "k8s.io/kubectl@${STAGING_VERSION}" 2>/dev/null || true
  fi
}

mkdir -p "${DEST}"
[[ -x "${DEST}/kube-apiserver" ]] || build_k8s kube-apiserver
[[ -x "${DEST}/etcd" ]] || build_etcd
[[ -e "${DEST}/kubectl" ]] || link_kubectl
# `envtest.sh node` also builds what a real one-node cluster needs (hack/cluster.sh).
if [[ "${1:-}" == node ]]; then
  missing=()
  for cmd in kubelet kube-controller-manager kube-scheduler kube-proxy; do
    [[ -x "${DEST}/${cmd}" ]] || missing+=("${cmd}")
  done
  (( ${#missing[@]} == 0 )) || build_k8s "${missing[@]}"
fi
echo "${DEST}"
