#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver, etcd) from the Go module proxy,
# because the usual envtest download site cannot be reached here. Binaries are cached
# under bin/k8s/<version>; a warm run only checks they are there.
# The last line printed is the folder to export as KUBEBUILDER_ASSETS.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.7.3}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${ROOT}/bin/k8s/${K8S_VERSION}-linux-amd64"
STAGING_VERSION="v0.${K8S_VERSION#*.}"

log() { echo "envtest: $*" >&2; }

build_apiserver() {
  local work; work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  log "building kube-apiserver v${K8S_VERSION} (about 11 minutes cold on 2 cores)"
  local gomod
  gomod="$(cd "${work}" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module cantus.dev/envtest-build"
    echo "go $(go env GOVERSION | sed 's/^go//; s/\.[0-9]*$//')"
    echo "require k8s.io/kubernetes v${K8S_VERSION}"
    # k8s.io/kubernetes points its staging modules at ./staging; swap in their published versions.
    grep -oE '^\s*k8s.io/[a-z0-9-]+ => ./staging' "${gomod}" | awk -v v="${STAGING_VERSION}" '{print "replace " $1 " => " $1 " " v}'
  } > "${work}/go.mod"
  cat > "${work}/tools.go" <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  (cd "${work}" && go mod tidy -e >/dev/null 2>&1 || true)
  (cd "${work}" && GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${K8S_VERSION#*.}" \
    -o "${DEST}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
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
[[ -x "${DEST}/kube-apiserver" ]] || build_apiserver
[[ -x "${DEST}/etcd" ]] || build_etcd
[[ -e "${DEST}/kubectl" ]] || link_kubectl
echo "${DEST}"
