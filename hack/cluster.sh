#!/usr/bin/env bash
# A real one-node Kubernetes cluster on this machine (root), so the default kubernetes
# runtime runs real pods: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubelet and kube-proxy built from k8s.io/kubernetes by hack/envtest.sh; containerd 2
# built from the Go module proxy (`make bin/containerd`: image volumes need containerd
# 2.1 or newer, and Debian ships 1.6), with Debian's runc, ctr, CNI plugins and iptables.
# Images are built locally (hack/image) and imported into containerd, so no registry is
# ever contacted.
#
#   hack/cluster.sh up     start the node (a clean one: `down` runs first); writes .demo/kubeconfig
#   hack/cluster.sh images rebuild and import the operator image into the running node
#   hack/cluster.sh test-images  build and import the images only the cluster tests run
#   hack/cluster.sh demo   `up`, `make deploy`, the samples, and MCP calls through the Services
#   hack/cluster.sh test   `up`, `make deploy`, go test -tags cluster ./test/cluster/, then `down`
#                          (CLUSTER_TEST_RUN=REGEXP runs only the tests it matches)
#   hack/cluster.sh down   stop everything and remove every container, mount, netdev,
#                          iptables rule and file of ours
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEMO="${ROOT}/.demo"
LOGS="${DEMO}/cluster"
KUBECONFIG_PATH="${DEMO}/kubeconfig"
PEERS="${ROOT}/test/mcp-peers"
# Node state lives outside the checkout: the kubelet and containerd need real (non-overlay)
# folders they can mount on, and one machine runs one such node.
STATE="${CANTUS_NODE_STATE:-/var/lib/cantus-node}"
RUN="${CANTUS_NODE_RUN:-/run/cantus-node}"
NODE_NAME="cantus-node"
POD_CIDR="10.244.0.0/24"
SERVICE_CIDR="10.96.0.0/16"
API_SERVICE_IP="10.96.0.1"
API_PORT="6443"
# Away from etcd's usual ports, so another etcd on this machine is left alone.
ETCD_PORT="12379"
BRIDGE="cantus0"
OPERATOR_IMAGE="${IMG:-cantus.local/cantus-operator:dev}"
PAUSE_IMAGE="cantus.local/pause:1"
CTR=(ctr --address "${RUN}/containerd.sock" --namespace k8s.io)
# Built by `make bin/containerd` with its runc shim beside it.
CONTAINERD="${ROOT}/bin/containerd"

say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }
die() { echo "cluster: $*" >&2; exit 1; }

host_ip() { ip -4 route get 1.0.0.0 | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}'; }

# --- prerequisites -------------------------------------------------------------------

require_host() {
  [[ "$(id -u)" == 0 ]] || die "needs root (containerd, runc, iptables and mounts); run as root"
  [[ -d /sys/fs/cgroup ]] || die "no /sys/fs/cgroup: the kubelet cannot run pods here"
  local missing=()
  # Debian's containerd package for ctr (the client that imports images); the daemon is
  # bin/containerd.
  command -v ctr >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v jq >/dev/null || missing+=(jq)
  if (( ${#missing[@]} > 0 )); then
    say "installing ${missing[*]} from Debian"
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    apt-get update -qq >&2 || die "apt-get update failed; cannot install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
      || die "could not install ${missing[*]}"
  fi
}

# --- certificates and kubeconfigs ----------------------------------------------------

pki() {
  local dir="${STATE}/pki" ip="$1"
  mkdir -p "${dir}"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=cantus-node-ca" \
    -keyout "${dir}/ca.key" -out "${dir}/ca.crt" 2>/dev/null
  openssl genrsa -out "${dir}/sa.key" 2048 2>/dev/null
  openssl rsa -in "${dir}/sa.key" -pubout -out "${dir}/sa.pub" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,IP:${ip},IP:${API_SERVICE_IP},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin "/O=system:masters/CN=cantus-admin"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  cert kubelet "/O=system:nodes/CN=system:node:${NODE_NAME}"
  cert controller-manager "/CN=system:kube-controller-manager"
  cert scheduler "/CN=system:kube-scheduler"
  cert proxy "/CN=system:kube-proxy"
  local who
  for who in admin kubelet controller-manager scheduler proxy; do
    kubeconfig "${who}" "${STATE}/${who}.kubeconfig"
  done
}

cert() {
  local name="$1" subject="$2" ext="${3:-}" dir="${STATE}/pki"
  openssl req -newkey rsa:2048 -nodes -subj "${subject}" -keyout "${dir}/${name}.key" -out "${dir}/${name}.csr" 2>/dev/null
  openssl x509 -req -in "${dir}/${name}.csr" -CA "${dir}/ca.crt" -CAkey "${dir}/ca.key" -CAcreateserial -days 30 \
    ${ext:+-extfile <(printf '%s\n' "${ext}")} -out "${dir}/${name}.crt" 2>/dev/null
}

kubeconfig() {
  local who="$1" file="$2" dir="${STATE}/pki"
  KUBECONFIG="${file}" kubectl config set-cluster cantus --server "https://127.0.0.1:${API_PORT}" \
    --certificate-authority "${dir}/ca.crt" --embed-certs >/dev/null
  KUBECONFIG="${file}" kubectl config set-credentials "${who}" --client-certificate "${dir}/${who}.crt" \
    --client-key "${dir}/${who}.key" --embed-certs >/dev/null
  KUBECONFIG="${file}" kubectl config set-context cantus --cluster cantus --user "${who}" >/dev/null
  KUBECONFIG="${file}" kubectl config use-context cantus >/dev/null
}

# --- processes -----------------------------------------------------------------------

start() {
  local name="$1"; shift
  nohup "$@" >"${LOGS}/${name}.log" 2>&1 &
  echo $! >"${RUN}/${name}.pid"
}

stop_pid() {
  local file="${RUN}/$1.pid"
  [[ -f "${file}" ]] || return 0
  local pid; pid="$(cat "${file}")"
  if kill -0 "${pid}" 2>/dev/null; then
    kill -TERM "${pid}" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${file}"
}

wait_until() {
  local what="$1" tries="$2"; shift 2
  for _ in $(seq 1 "${tries}"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 1
  done
  die "timed out waiting for ${what}; logs in ${LOGS}"
}

# --- configuration files -------------------------------------------------------------

write_configs() {
  local ip="$1"
  mkdir -p "${STATE}/cni" "${STATE}/kubelet"
  # containerd 2's config (version 3): the CRI plugin is split into an images and a
  # runtime plugin.
  cat >"${STATE}/containerd.toml" <<TOML
version = 3
root = "${STATE}/containerd"
state = "${RUN}/containerd"
[grpc]
  address = "${RUN}/containerd.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    # Built locally by hack/pause and imported: the node never pulls registry.k8s.io/pause.
    sandbox = "${PAUSE_IMAGE}"
[plugins.'io.containerd.cri.v1.runtime']
  # This machine refuses a negative oom_score_adj (measured: "permission denied"), and the
  # kubelet asks -998 for every sandbox, so runc failed with "can't get final child's PID";
  # this clamps each container's value to containerd's own instead.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        # Matches the kubelet's cgroupDriver: there is no systemd to delegate cgroups to.
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${STATE}/cni"
TOML
  # One bridge with host-local addresses is the whole pod network of a one-node cluster.
  # hairpinMode lets a pod reach itself through its own Service's ClusterIP.
  cat >"${STATE}/cni/10-cantus.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "cantus",
  "plugins": [{
    "type": "bridge",
    "bridge": "${BRIDGE}",
    "isGateway": true,
    "ipMasq": true,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": "${POD_CIDR}"}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": "${STATE}/cni-ipam"
    }
  }]
}
JSON
  cat >"${STATE}/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${STATE}/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://${RUN}/containerd.sock
# No systemd runs here, so cgroups are managed directly (containerd's SystemdCgroup=false).
cgroupDriver: cgroupfs
# This host has cgroup v1 (with only a cgroup2 "unified" mount); kubelet 1.35+ refuses v1
# unless told not to. Measured: v1.37.2 runs pods here with this setting.
failCgroupV1: false
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
# A shared development machine: evict only when really out of resources, and never
# collect the locally imported images (they cannot be pulled back).
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: /etc/resolv.conf
YAML
  cat >"${STATE}/proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: ${STATE}/proxy.kubeconfig}
mode: iptables
clusterCIDR: ${POD_CIDR}
hostnameOverride: ${NODE_NAME}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# Leave the host's conntrack table size alone (it is not ours to tune).
conntrack: {maxPerCore: 0}
YAML
  # The audit log is how the cluster tests see the manager's API writes and any Forbidden:
  # make deploy's manager, and the one TestHelmReleaseInstallUpgradeUninstall installs
  # with Helm (release helm in cantus-system).
  cat >"${STATE}/audit.yaml" <<YAML
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["system:serviceaccount:cantus-system:cantus-operator", "system:serviceaccount:cantus-system:helm-cantus-operator"]
- level: None
YAML
}

# --- images --------------------------------------------------------------------------

build_images() {
  local out="${DEMO}/images"
  mkdir -p "${out}" "${ROOT}/bin/image"
  say "building the operator image ${OPERATOR_IMAGE} and the pause image (no Docker engine)"
  # The same build as the Dockerfile's, so both images hold the same binaries.
  (cd "${ROOT}" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags="-s -w" -o bin/image/manager ./cmd/manager \
    && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags="-s -w" -o bin/image/adapter ./cmd/adapter \
    && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/image/pause ./hack/pause \
    && go build -o bin/image/image ./hack/image)
  "${ROOT}/bin/image/image" -tag "${OPERATOR_IMAGE}" -o "${out}/operator.tar" -entrypoint /manager \
    /manager="${ROOT}/bin/image/manager" /adapter="${ROOT}/bin/image/adapter"
  "${ROOT}/bin/image/image" -tag "${PAUSE_IMAGE}" -o "${out}/pause.tar" -user 65535:65535 -entrypoint /pause \
    /pause="${ROOT}/bin/image/pause"
}

import_images() {
  local tar
  for tar in "$@"; do
    "${CTR[@]}" images import --all-platforms "${tar}" >&2
  done
}

# --- up ------------------------------------------------------------------------------

up() {
  require_host
  down
  say "containerd 2 (make bin/containerd: built once, about 10 minutes cold)"
  make -C "${ROOT}" --no-print-directory bin/containerd >&2
  local assets ip
  assets="$("${ROOT}/hack/envtest.sh" node | tail -n1)"
  ip="$(host_ip)"
  [[ -n "${ip}" ]] || die "no IPv4 address with a route on this machine"
  mkdir -p "${STATE}" "${RUN}" "${LOGS}"
  # A new node starts new logs: the cluster tests read the audit log of this run only.
  rm -f "${LOGS}"/*.log
  cat /proc/sys/net/ipv4/ip_forward >"${STATE}/ip_forward.orig"
  ls /var/run/netns 2>/dev/null >"${STATE}/netns.orig" || true
  build_images
  say "starting a one-node cluster (${NODE_NAME}, ${ip}, Kubernetes $(basename "${assets}"))"
  pki "${ip}"
  write_configs "${ip}"
  # Pods reach each other and the API server through this host.
  echo 1 >/proc/sys/net/ipv4/ip_forward

  # bin/ first in PATH: containerd starts the shim it finds there, its own version, not
  # Debian's containerd-shim-runc-v2 1.6.
  start containerd env PATH="${ROOT}/bin:${PATH}" "${CONTAINERD}" --config "${STATE}/containerd.toml"
  start etcd "${assets}/etcd" --data-dir "${STATE}/etcd" --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" --listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-cluster "default=http://127.0.0.1:$((ETCD_PORT + 1))" \
    --unsafe-no-fsync
  local pki="${STATE}/pki"
  start kube-apiserver "${assets}/kube-apiserver" --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
    --bind-address 0.0.0.0 --secure-port "${API_PORT}" --advertise-address "${ip}" \
    --service-cluster-ip-range "${SERVICE_CIDR}" --authorization-mode Node,RBAC \
    --client-ca-file "${pki}/ca.crt" --tls-cert-file "${pki}/apiserver.crt" --tls-private-key-file "${pki}/apiserver.key" \
    --kubelet-client-certificate "${pki}/apiserver-kubelet-client.crt" --kubelet-client-key "${pki}/apiserver-kubelet-client.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local --service-account-key-file "${pki}/sa.pub" \
    --service-account-signing-key-file "${pki}/sa.key" --enable-admission-plugins NodeRestriction --kubelet-preferred-address-types InternalIP \
    --audit-policy-file "${STATE}/audit.yaml" --audit-log-path "${LOGS}/audit.log" --audit-log-format json
  cp "${STATE}/admin.kubeconfig" "${KUBECONFIG_PATH}"
  export KUBECONFIG="${KUBECONFIG_PATH}"
  wait_until "the API server" 120 kubectl get --raw /readyz
  start kube-controller-manager "${assets}/kube-controller-manager" --kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --authentication-kubeconfig "${STATE}/controller-manager.kubeconfig" --authorization-kubeconfig "${STATE}/controller-manager.kubeconfig" \
    --service-account-private-key-file "${pki}/sa.key" --root-ca-file "${pki}/ca.crt" \
    --cluster-signing-cert-file "${pki}/ca.crt" --cluster-signing-key-file "${pki}/ca.key" \
    --use-service-account-credentials --leader-elect=false --bind-address 127.0.0.1 --secure-port 10257
  start kube-scheduler "${assets}/kube-scheduler" --kubeconfig "${STATE}/scheduler.kubeconfig" \
    --authentication-kubeconfig "${STATE}/scheduler.kubeconfig" --authorization-kubeconfig "${STATE}/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259
  wait_until "containerd" 60 "${CTR[@]}" version
  import_images "${DEMO}/images/pause.tar" "${DEMO}/images/operator.tar"
  start kubelet "${assets}/kubelet" --config "${STATE}/kubelet/config.yaml" --kubeconfig "${STATE}/kubelet.kubeconfig" \
    --root-dir "${STATE}/kubelet" --cert-dir "${STATE}/kubelet/pki" --hostname-override "${NODE_NAME}" --node-ip "${ip}"
  start kube-proxy "${assets}/kube-proxy" --config "${STATE}/proxy.yaml"
  wait_until "node ${NODE_NAME} Ready" 180 kubectl wait --for=condition=Ready "node/${NODE_NAME}" --timeout=1s
  storage
  # The API server's PodSecurity admission, not our reading, decides whether our pods pass.
  kubectl label namespace default pod-security.kubernetes.io/enforce=restricted --overwrite >/dev/null
  say "node ${NODE_NAME} is Ready; KUBECONFIG=${KUBECONFIG_PATH}"
}

# storage: static local PersistentVolumes behind a default StorageClass, so a memory PVC
# binds on this node; the kubelet applies the pod's fsGroup to local volumes, which is
# what lets uid 65532 write there.
storage() {
  local i
  kubectl apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: cantus-local
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
YAML
  for i in $(seq 1 8); do
    mkdir -p "${STATE}/pv/pv${i}"
    kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolume
metadata:
  name: cantus-local-${i}
spec:
  capacity: {storage: 5Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: cantus-local
  local: {path: ${STATE}/pv/pv${i}}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [${NODE_NAME}]}
YAML
  done
}

# --- down ----------------------------------------------------------------------------

down() {
  [[ -d "${STATE}" || -d "${RUN}" ]] || { rm -f "${KUBECONFIG_PATH}"; return 0; }
  # Stop what recreates pods, then let the kubelet tear every pod down through the CRI
  # (which also releases its network through CNI); whatever is left is removed by force.
  stop_pid kube-controller-manager
  stop_pid kube-scheduler
  if [[ -f "${RUN}/kubelet.pid" ]] && KUBECONFIG="${STATE}/admin.kubeconfig" kubectl get --raw /readyz >/dev/null 2>&1; then
    KUBECONFIG="${STATE}/admin.kubeconfig" kubectl delete pods --all --all-namespaces --grace-period=0 --force --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 1 60); do
      [[ -z "$("${CTR[@]}" tasks ls -q 2>/dev/null)" ]] && break
      sleep 1
    done
  fi
  stop_pid kubelet
  stop_pid kube-proxy
  remove_containers
  stop_pid kube-apiserver
  stop_pid etcd
  stop_pid containerd
  remove_network
  remove_mounts
  remove_cgroups
  if [[ -f "${STATE}/ip_forward.orig" ]]; then cat "${STATE}/ip_forward.orig" >/proc/sys/net/ipv4/ip_forward; fi
  rm -rf "${STATE}" "${RUN}" "${KUBECONFIG_PATH}"
}

remove_containers() {
  "${CTR[@]}" version >/dev/null 2>&1 || return 0
  local id
  for id in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
    "${CTR[@]}" tasks kill --all --signal SIGKILL "${id}" >/dev/null 2>&1 || true
  done
  sleep 1
  for id in $("${CTR[@]}" containers ls -q 2>/dev/null); do
    "${CTR[@]}" tasks delete --force "${id}" >/dev/null 2>&1 || true
    "${CTR[@]}" containers delete "${id}" >/dev/null 2>&1 || true
  done
}

# remove_network deletes the pod network namespaces this node created, its bridge, and
# every iptables chain the kubelet, kube-proxy and the CNI bridge plugin added.
remove_network() {
  local ns
  for ns in $(ls /var/run/netns 2>/dev/null); do
    if grep -qx "${ns}" "${STATE}/netns.orig" 2>/dev/null; then continue; fi
    [[ "${ns}" == cni-* ]] || continue
    umount "/var/run/netns/${ns}" 2>/dev/null || true
    rm -f "/var/run/netns/${ns}"
  done
  ip link delete "${BRIDGE}" 2>/dev/null || true
  local tool table
  for tool in iptables ip6tables; do
    command -v "${tool}" >/dev/null || continue
    for table in nat filter mangle; do
      remove_chains "${tool}" "${table}"
    done
  done
}

remove_chains() {
  local tool="$1" table="$2" rule chain
  # Jumps from the built-in chains first (a chain still referenced cannot be deleted).
  { "${tool}-save" -t "${table}" 2>/dev/null || true; } | { grep -E '^-A [A-Z]+ .*(-j (KUBE-|CNI-)|cantus)' || true; } |
    while read -r rule; do
      eval "${tool} -t ${table} -D ${rule#-A }" 2>/dev/null || true
    done
  for chain in $("${tool}-save" -t "${table}" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\) .*/\1/p'); do
    "${tool}" -t "${table}" -F "${chain}" 2>/dev/null || true
  done
  for chain in $("${tool}-save" -t "${table}" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\) .*/\1/p'); do
    "${tool}" -t "${table}" -X "${chain}" 2>/dev/null || true
  done
}

remove_mounts() {
  local mnt
  for mnt in $(findmnt -rn -o TARGET | grep -E "^(${STATE}|${RUN})(/|$)" | sort -r); do
    umount "${mnt}" 2>/dev/null || umount -l "${mnt}" 2>/dev/null || true
  done
}

# remove_cgroups removes the (empty) cgroups the kubelet made for pods and QoS classes.
remove_cgroups() {
  local dir
  for dir in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d "${dir}" ]] && find "${dir}" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

# --- demo ----------------------------------------------------------------------------

inspector() {
  (cd "${PEERS}/node_modules/@modelcontextprotocol/inspector-cli/build" && node index.js "$1" --transport http "${@:2}")
  echo
}

# service_url turns a SkillServer's status.url (cluster DNS) into its ClusterIP URL: this
# machine has no cluster DNS, so the Service is resolved through the API.
service_url() {
  local name="$1" url ip host
  url="$(kubectl get skillserver "${name}" -o jsonpath='{.status.url}')"
  ip="$(kubectl get service "${name}" -o jsonpath='{.spec.clusterIP}')"
  host="${url#http://}"; host="${host%%:*}"
  echo "${url/${host}/${ip}}"
}

deploy_operator() {
  say "make deploy IMG=${OPERATOR_IMAGE} (config/default: the operator as a pod, its own ServiceAccount and RBAC, and the admission policy that bounds them)"
  make -C "${ROOT}" --no-print-directory deploy IMG="${OPERATOR_IMAGE}" KUBECTL=kubectl
  kubectl -n cantus-system rollout status deployment/cantus-operator --timeout=180s
  kubectl wait --for=condition=Established crd/skillservers.cantus.dev --timeout=60s >/dev/null
}

# cluster_test: a fresh node, the operator as a pod, the test/cluster tests, and the node
# removed again whatever the outcome.
cluster_test() {
  local started=${SECONDS} rc=0
  trap 'down' EXIT
  up
  deploy_operator
  "${ROOT}/hack/test-images.sh"
  # The admin allows the impostor image as an adapter (a SkillServer's spec.pod.image in
  # TestReadyOnlyWhenThePodsServeTheTools), the way docs/operations.md says: in the admission
  # policy's parameters, which the operator itself may not edit; and the locally built
  # test images (cantus.local/...) as stdio bridges.
  kubectl -n cantus-system patch configmap cantus-operator-admission --type merge \
    -p "{\"data\":{\"adapterImages\":\"${OPERATOR_IMAGE},cantus.local/impostor:1\",\"bridgeImages\":\"cantus.local\"}}"
  make -C "${ROOT}" --no-print-directory bin/helm # TestHelmChartAcceptedByTheNode renders the chart
  say "go test -tags cluster ./test/cluster/"
  (cd "${ROOT}" && go test -tags cluster ./test/cluster/ -count=1 -v -timeout 40m ${CLUSTER_TEST_RUN:+-run "${CLUSTER_TEST_RUN}"}) || rc=$?
  (( rc == 0 )) || kubectl -n cantus-system logs deploy/cantus-operator --tail=100 >&2 || true
  say "cluster tests: exit ${rc} in $(( SECONDS - started ))s"
  return "${rc}"
}

demo() {
  local started=${SECONDS}
  up
  deploy_operator
  
  say "kubectl apply -k config/samples"
  kubectl apply -k "${ROOT}/config/samples"
  say "kubectl wait --for=condition=Ready skillserver/library skillserver/notebook"
  kubectl wait --for=condition=Ready skillserver/library skillserver/notebook --timeout=300s
  say "kubectl get skillservers,pods -o wide"
  kubectl get skillservers,pods -o wide

  local library notebook
  library="$(service_url library)"
  say "MCP Inspector CLI: tools/call search_book through the Service (${library})"
  inspector "${library}" --method tools/call --tool-name search_book --tool-arg 'title="Dune"'

  notebook="$(service_url notebook)"
  say "the memory sample keeps a file across a deleted pod"
  inspector "${notebook}" --method tools/call --tool-name memory --tool-arg 'command="create"' \
    --tool-arg 'path="/memories/reading.md"' --tool-arg 'file_text="Dune: chapter 3\n"'
  kubectl delete pod -l "app.kubernetes.io/instance=notebook" --wait=true
  kubectl wait --for=condition=Ready skillserver/notebook --timeout=180s
  kubectl rollout status deployment/notebook --timeout=180s
  kubectl get pods -l "app.kubernetes.io/instance=notebook" -o wide
  inspector "${notebook}" --method tools/call --tool-name memory --tool-arg 'command="view"' --tool-arg 'path="/memories/reading.md"'

  say "the cluster keeps running ($(( SECONDS - started ))s)"
  cat <<MSG
  export KUBECONFIG=${KUBECONFIG_PATH}
  kubectl get skillservers,pods -o wide
  logs: ${LOGS}/*.log (the operator: kubectl -n cantus-system logs deploy/cantus-operator)
  stop: make demo-down
MSG
}

case "${1:-}" in
  up) up ;;
  images) build_images; import_images "${DEMO}/images/operator.tar" ;;
  test-images) "${ROOT}/hack/test-images.sh" ;;
  demo) demo ;;
  test) cluster_test ;;
  down)
    if [[ -d "${STATE}" || -d "${RUN}" ]]; then
      [[ "$(id -u)" == 0 ]] || die "the node's files, mounts and iptables rules can only be removed as root"
      down
      echo "cluster stopped and removed"
    fi ;;
  *) echo "usage: $0 up|images|demo|down" >&2; exit 2 ;;
esac
