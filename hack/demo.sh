#!/usr/bin/env bash
# `make demo`: a real kube-apiserver + etcd, the CRDs, the operator with the local runtime,
# the samples, `kubectl wait`, and a tool call through status.url with the MCP Inspector CLI,
# then an Agent Skill, a prompt and a resource read the same way.
# `make demo-down` stops what it started. Running `up` twice restarts cleanly.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEMO="${ROOT}/.demo"
KUBECONFIG_PATH="${DEMO}/kubeconfig"
PEERS="${ROOT}/test/mcp-peers"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

stop_pid() {
  local file="$1"
  [[ -f "${file}" ]] || return 0
  local pid; pid="$(cat "${file}")"
  if kill -0 "${pid}" 2>/dev/null; then
    kill -TERM "${pid}" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "${pid}" 2>/dev/null || true
  fi
  rm -f "${file}"
}

down() {
  stop_pid "${DEMO}/callerremote.pid"
  stop_pid "${DEMO}/manager.pid"
  stop_pid "${DEMO}/controlplane.pid"
  rm -f "${KUBECONFIG_PATH}"
}

wait_for_file() {
  local file="$1" log="$2"
  for _ in $(seq 1 300); do
    [[ -s "${file}" ]] && return 0
    sleep 0.2
  done
  echo "timed out waiting for ${file}; log:" >&2
  tail -n 40 "${log}" >&2
  exit 1
}

# inspector runs the MCP Inspector CLI from its build folder, as it must be.
inspector() {
  (cd "${PEERS}/node_modules/@modelcontextprotocol/inspector-cli/build" && node index.js "$1" --transport http "${@:2}")
  echo
}

# caller_credentials shows agents acting as their users at a remote: a gateway exchanges
# each caller's service-account token at a token service (RFC 8693) for a token for the
# remote, which answers with the subject it saw; a caller of an import that takes each
# caller's own key is told which Secret to create, and once it exists its call goes
# through; a caller of an import in connect mode is given a link, its user signs in at
# the remote's authorization server through it, and its call then goes through as that
# user. Each answer is a line of .demo/demo.log.
caller_credentials() {
  say "agents act as their users at a remote: each caller's token exchanged (RFC 8693), or its own key"
  local jwks="${DEMO}/cluster-jwks.json" issuer
  kubectl get --raw /openid/v1/jwks >"${jwks}"
  issuer="$(kubectl get --raw /.well-known/openid-configuration | sed -n 's/.*"issuer":"\([^"]*\)".*/\1/p')"
  ( umask 077; head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"${DEMO}/gateway-client-secret"
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"${DEMO}/connect-client-secret" )
  rm -f "${DEMO}/callerremote.env"
  go build -o "${ROOT}/bin/callerremote" "${ROOT}/hack/callerremote"
  # Without --connect-base-url the operator's connect links and callback are on the
  # catalog's address: the operator is registered there beforehand, with that callback.
  local catalog; catalog="$(cat "${DEMO}/catalog-address")"
  nohup "${ROOT}/bin/callerremote" -cluster-issuer "${issuer}" -cluster-jwks "${jwks}" \
    -client-secret-file "${DEMO}/gateway-client-secret" -api-keys "probe-key-5c1f=cantus-probe,carol-key-77d2=carol" \
    -connect-redirect "https://${catalog}/connect/v1/callback" -connect-secret-file "${DEMO}/connect-client-secret" \
    -users "dave=dave-password-3b9e" \
    -out "${DEMO}/callerremote.env" >"${DEMO}/callerremote.log" 2>&1 &
  echo $! >"${DEMO}/callerremote.pid"
  wait_for_file "${DEMO}/callerremote.env" "${DEMO}/callerremote.log"
  local TOKEN_ENDPOINT REMOTE TOKEN_ISSUER CONNECT_REMOTE CONNECT_CLIENT_ID CONTROL
  # shellcheck disable=SC1091
  source "${DEMO}/callerremote.env"
  echo "token service ${TOKEN_ENDPOINT}, remote ${REMOTE}"
  kubectl create secret generic whoami-client --from-file=secret="${DEMO}/gateway-client-secret" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create secret generic whoami-probe --from-literal=token="Bearer probe-key-5c1f" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create secret generic whoami-connect-client --from-file=secret="${DEMO}/connect-client-secret" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  # The key that encrypts connected accounts at rest, in the operator's namespace.
  kubectl create namespace cantus-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n cantus-system create secret generic cantus-connect-keys \
    --from-literal=k1="$(head -c 32 /dev/urandom | base64 | tr -d '\n')" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create serviceaccount agents-gateway --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply -f - >/dev/null <<'YAML'
apiVersion: cantus.dev/v1alpha1
kind: ToolSourcePolicy
metadata: {name: demo-gateway-accounts}
spec:                           # the gateway's pods may run as its own service account
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default}}
  serviceAccounts: ["agents-gateway"]
YAML
  kubectl apply -f - <<YAML
apiVersion: cantus.dev/v1alpha1
kind: RemoteToolImport
metadata: {name: whoami, namespace: default}
spec:
  url: ${REMOTE}
  headers:                      # the operator's probe: a service identity of its own
  - name: Authorization
    valueFrom: {name: whoami-probe, key: token}
  callerCredentials:            # calls: the caller's token, exchanged for the remote
    tokenExchange:
      tokenEndpoint: ${TOKEN_ENDPOINT}
      audience: whoami-remote
      clientID: cantus-gateway
      clientSecret: {name: whoami-client, key: secret}
---
apiVersion: cantus.dev/v1alpha1
kind: RemoteToolImport
metadata: {name: whoami-keys, namespace: default}
spec:
  url: ${REMOTE}
  headers:
  - name: Authorization
    valueFrom: {name: whoami-probe, key: token}
  callerCredentials:            # calls: each caller's own key, from a Secret of its own
    perCallerSecret: {}
---
apiVersion: cantus.dev/v1alpha1
kind: RemoteToolImport
metadata: {name: whoami-connect, namespace: default}
spec:
  url: ${CONNECT_REMOTE}
  headers:
  - name: Authorization
    valueFrom: {name: whoami-probe, key: token}
  callerCredentials:            # calls: the account each caller's user connected
    connect:                    # the authorization server comes from the remote's RFC 9728 metadata
      client: {clientID: ${CONNECT_CLIENT_ID}, clientSecret: {name: whoami-connect-client, key: secret}}
---
apiVersion: cantus.dev/v1alpha1
kind: SkillServer
metadata: {name: agents, namespace: default}
spec:
  pod: {serviceAccountName: agents-gateway}  # connect mode hands callers' tokens to this account only
  auth:
    serviceAccountTokens: {}    # callers have an identity: their service account
  imports:
  - {name: whoami, prefix: ex_}
  - {name: whoami-keys, prefix: key_}
  - {name: whoami-connect, prefix: my_}
YAML
  kubectl wait --for=condition=Ready remotetoolimport/whoami remotetoolimport/whoami-keys remotetoolimport/whoami-connect --timeout=60s
  kubectl wait --for=condition=Ready skillserver/agents --timeout=60s
  kubectl get remotetoolimports whoami whoami-keys whoami-connect -o wide
  local agents audience
  agents="$(kubectl get skillserver agents -o jsonpath='{.status.url}')"
  audience="agents.default.skillserver.cantus.dev"
  for who in alice bob carol dave; do
    kubectl create serviceaccount "${who}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  done
  : >"${DEMO}/demo.log"
  for who in alice bob; do
    echo "-- ${who} calls ex_whoami"
    inspector "${agents}" --method tools/call --tool-name ex_whoami \
      --header "Authorization: Bearer $(kubectl create token "${who}" --audience "${audience}")" \
      | grep -o 'remote saw subject=[^"]*' | tee -a "${DEMO}/demo.log"
  done
  echo "-- carol calls key_whoami, with no key of her own yet"
  local told
  told="$(inspector "${agents}" --method tools/call --tool-name key_whoami \
    --header "Authorization: Bearer $(kubectl create token carol --audience "${audience}")" || true)"
  # The answer is JSON: its escaped quotes become single quotes before the message is cut out.
  echo "${told}" | sed "s/\\\\\"/'/g" | grep -o 'caller_credentials_missing: [^"]*' | tee -a "${DEMO}/demo.log"
  echo "-- carol's key goes in the Secret she was told to create"
  kubectl create secret generic carol-whoami-key --from-literal=token=carol-key-77d2 --dry-run=client -o yaml \
    | kubectl label --local -f - cantus.dev/caller-credentials-for=whoami-keys -o yaml \
    | kubectl annotate --local -f - cantus.dev/caller=serviceaccount:default/carol -o yaml | kubectl apply -f -
  local answer=""
  for _ in $(seq 60); do
    answer="$(inspector "${agents}" --method tools/call --tool-name key_whoami \
      --header "Authorization: Bearer $(kubectl create token carol --audience "${audience}")" | grep -o 'remote saw subject=[^"]*' || true)"
    [[ -n "${answer}" ]] && break
    sleep 0.5
  done
  echo "${answer}" | tee -a "${DEMO}/demo.log"

  echo "-- dave calls my_whoami, with no account connected at the remote yet"
  told="$(inspector "${agents}" --method tools/call --tool-name my_whoami \
    --header "Authorization: Bearer $(kubectl create token dave --audience "${audience}")" || true)"
  local link
  link="$(echo "${told}" | grep -o 'https://[^ "\\]*/connect/v1/start[^ "\\]*' | head -n1)"
  echo "connect: ${link}" | tee -a "${DEMO}/demo.log"
  echo "-- dave's user opens the link and signs in at the remote's authorization server"
  curl -sf -X POST -G --data-urlencode "url=${link}" --data-urlencode user=dave \
    --data-urlencode password=dave-password-3b9e "${CONTROL}/login"
  inspector "${agents}" --method tools/call --tool-name my_whoami \
    --header "Authorization: Bearer $(kubectl create token dave --audience "${audience}")" \
    | grep -o 'remote saw subject=[^"]*' | tee -a "${DEMO}/demo.log"
}

# discovery_search shows a gateway that lists a few tools and finds the rest: in Search
# mode tools/list holds the pinned tools and find_tools/call_tool; find_tools ranks the
# declared and the imported tools by a task description (BM25 over names, descriptions
# and parameters), and call_tool calls what was found through the same path as a direct
# call.
discovery_search() {
  say "progressive discovery: a gateway in Search mode finds a tool by a task description"
  kubectl apply -f - <<'YAML'
apiVersion: cantus.dev/v1alpha1
kind: SkillServer
metadata: {name: help-desk, namespace: default}
spec:
  discovery: {mode: Search, pinned: ["open_ticket"]}
  imports:
  - name: library-import
    prefix: lib_
  skills:
  - name: open_ticket
    description: Open a support ticket for a customer problem.
    template: {text: "ticket opened: {{ .summary }}"}
    inputSchema: {type: object, properties: {summary: {type: string}}, required: [summary]}
  - name: refund_order
    description: Refund a customer's order, fully or in part, to the original payment method.
    template: {text: "refunded order {{ .order }}"}
    inputSchema: {type: object, properties: {order: {type: string, description: Order number}}, required: [order]}
  - name: reset_password
    description: Send a password reset link to a user's email address.
    template: {text: "reset link sent to {{ .email }}"}
    inputSchema: {type: object, properties: {email: {type: string}}, required: [email]}
  - name: track_shipment
    description: Look up where a parcel is and when it will be delivered.
    template: {text: "parcel {{ .tracking }} arrives tomorrow"}
    inputSchema: {type: object, properties: {tracking: {type: string, description: Carrier tracking number}}, required: [tracking]}
  - name: weather_forecast
    description: Forecast the weather for a city for the next days.
    template: {text: "sunny in {{ .city }}"}
    inputSchema: {type: object, properties: {city: {type: string}}, required: [city]}
YAML
  kubectl wait --for=condition=Ready skillserver/help-desk --timeout=60s
  kubectl get skillserver help-desk -o wide
  local desk; desk="$(kubectl get skillserver help-desk -o jsonpath='{.status.url}')"
  echo "-- tools/list: the pinned tool and the two meta-tools"
  inspector "${desk}" --method tools/list | grep '"name"'
  echo "-- find_tools: \"a customer wants their money back for order 1042\""
  inspector "${desk}" --method tools/call --tool-name find_tools \
    --tool-arg 'query="a customer wants their money back for order 1042"' --tool-arg 'limit=2' | grep -o '"name": *"[a-z_]*"' | awk '!seen[$0]++' | head -n 2
  echo "-- call_tool refund_order"
  inspector "${desk}" --method tools/call --tool-name call_tool --tool-arg 'name="refund_order"' --tool-arg 'arguments={"order":"1042"}'
  echo "-- find_tools: \"check whether the library has the book Solaris\" (an imported tool)"
  inspector "${desk}" --method tools/call --tool-name find_tools \
    --tool-arg 'query="check whether the library has the book Solaris"' --tool-arg 'limit=2' | grep -o '"name": *"[a-z_]*"' | awk '!seen[$0]++' | head -n 2
  echo "-- call_tool lib_search_book"
  inspector "${desk}" --method tools/call --tool-name call_tool --tool-arg 'name="lib_search_book"' --tool-arg 'arguments={"title":"Solaris"}'
}

up() {
  down
  # Each demo starts from empty memory files, so that it runs the same every time.
  rm -rf "${DEMO}/memory"
  mkdir -p "${DEMO}"
  local assets; assets="$("${ROOT}/hack/envtest.sh" | tail -n1)"

  say "starting a real kube-apiserver + etcd ($(basename "${assets}"))"
  go build -o "${ROOT}/bin/controlplane" "${ROOT}/hack/controlplane"
  KUBEBUILDER_ASSETS="${assets}" nohup "${ROOT}/bin/controlplane" --write-kubeconfig "${KUBECONFIG_PATH}" \
    >"${DEMO}/controlplane.log" 2>&1 &
  echo $! >"${DEMO}/controlplane.pid"
  wait_for_file "${KUBECONFIG_PATH}" "${DEMO}/controlplane.log"
  export KUBECONFIG="${KUBECONFIG_PATH}"
  kubectl wait --for=condition=Established crd/skillservers.cantus.dev --timeout=60s >/dev/null

  say "starting the operator (local runtime: adapters are served on 127.0.0.1 by the manager)"
  nohup "${ROOT}/bin/manager" --runtime=local --kubeconfig "${KUBECONFIG_PATH}" \
    --local-memory-dir "${DEMO}/memory" \
    --catalog-bind-address=127.0.0.1:0 \
    --metrics-bind-address=0 --health-probe-bind-address=0 >"${DEMO}/manager.log" 2>&1 &
  echo $! >"${DEMO}/manager.pid"

  say "kubectl apply -k config/samples"
  kubectl apply -k "${ROOT}/config/samples"

  say "kubectl wait --for=condition=Ready skillserver/library"
  kubectl wait --for=condition=Ready skillserver/library --timeout=120s

  say "kubectl get skillservers -o wide"
  kubectl get skillservers -o wide

  local url; url="$(kubectl get skillserver library -o jsonpath='{.status.url}')"
  say "MCP Inspector CLI: tools/call search_book at ${url}"
  inspector "${url}" --method tools/call --tool-name search_book --tool-arg 'title="Dune"'


  kubectl wait --for=condition=Ready skillserver/notebook --timeout=60s
  local notebook; notebook="$(kubectl get skillserver notebook -o jsonpath='{.status.url}')"
  say "the memory tool of skillserver/notebook: create, view, and a delete the guard refuses"
  inspector "${notebook}" --method tools/call --tool-name memory --tool-arg 'command="create"' \
    --tool-arg 'path="/memories/reading.md"' --tool-arg 'file_text="Dune: chapter 3\n"'
  inspector "${notebook}" --method tools/call --tool-name memory --tool-arg 'command="view"' --tool-arg 'path="/memories"'
  inspector "${notebook}" --method tools/call --tool-name memory --tool-arg 'command="delete"' --tool-arg 'path="/memories/reading.md"'

  kubectl wait --for=condition=Ready skillserver/handbook --timeout=60s
  local handbook; handbook="$(kubectl get skillserver handbook -o jsonpath='{.status.url}')"
  say "skillserver/handbook: an Agent Skill from a labelled ConfigMap, a prompt and a resource"
  kubectl get skillserver handbook -o jsonpath='{range .status.agentSkills[*]}{.uri}{"  "}{.digest}{"\n"}{end}'
  inspector "${handbook}" --method resources/list
  inspector "${handbook}" --method resources/read --uri skill://acme/support/pdf-forms/SKILL.md
  inspector "${handbook}" --method prompts/get --prompt-name summarize_ticket --prompt-args 'ticket=The printer in room 4 is on fire'

  say "RemoteToolImport of the library SkillServer, allowed by ToolSourcePolicy demo-loopback"
  kubectl apply -f - <<YAML
apiVersion: cantus.dev/v1alpha1
kind: RemoteToolImport
metadata:
  name: library-import
  namespace: default
spec:
  url: ${url}
  tools:
    exclude: ["greet_*"]
YAML
  kubectl wait --for=condition=Ready remotetoolimport/library-import --timeout=60s
  kubectl wait --for=condition=SourceAllowed=false remotetoolimport/unlisted-tools --timeout=60s

  say "kubectl get remotetoolimports -o wide"
  kubectl get remotetoolimports -o wide
  echo
  kubectl get remotetoolimport unlisted-tools \
    -o jsonpath='unlisted-tools: {.status.conditions[?(@.type=="SourceAllowed")].message}{"\n"}'

  say "a gateway SkillServer that re-exports library-import's tools with the prefix lib_"
  kubectl apply -f - <<YAML
apiVersion: cantus.dev/v1alpha1
kind: SkillServer
metadata:
  name: gateway
  namespace: default
spec:
  serverInfo: {name: cantus-gateway}
  imports:
  - name: library-import
    prefix: lib_
YAML
  kubectl wait --for=condition=Ready skillserver/gateway --timeout=60s
  local gateway; gateway="$(kubectl get skillserver gateway -o jsonpath='{.status.url}')"
  kubectl get skillserver gateway -o jsonpath='{range .status.tools[*]}  {.name} <- {.source} ({.remoteName}){"\n"}{end}'
  inspector "${gateway}" --method tools/call --tool-name lib_search_book --tool-arg 'title="Solaris"'

  say "the discovery catalog (HTTPS, Kubernetes bearer token): one tool in two shapes"
  kubectl create serviceaccount demo-agent --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create role list-skillservers --verb=get,list --resource=skillservers.cantus.dev --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create rolebinding demo-agent-lists --role=list-skillservers --serviceaccount=default:demo-agent --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  local token catalog
  token="$(kubectl create token demo-agent --audience cantus.dev/catalog)"
  catalog="$(sed -n 's/.*serving the discovery catalog.*"address":"\([^"]*\)".*/\1/p' "${DEMO}/manager.log" | tail -n1)"
  echo "catalog at https://${catalog} (self-signed certificate, hence -k)"
  # docs/catalog.md's commands read the address from here.
  echo "${catalog}" >"${DEMO}/catalog-address"

  echo "-- format=anthropic"
  curl -sk -H "Authorization: Bearer ${token}" "https://${catalog}/v1/servers/default/gateway/tools/lib_search_book?format=anthropic"
  echo "-- format=huggingface"
  curl -sk -H "Authorization: Bearer ${token}" "https://${catalog}/v1/servers/default/gateway/tools/lib_search_book?format=huggingface"
  echo "-- without a token: HTTP $(curl -sk -o /dev/null -w '%{http_code}' "https://${catalog}/v1/servers")"

  say "agents call as their own service account: a reading room where visitors search and the librarian checks out"
  kubectl create serviceaccount visitor --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl create serviceaccount librarian --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl apply -f - <<YAML
apiVersion: cantus.dev/v1alpha1
kind: SkillServer
metadata:
  name: reading-room
  namespace: default
spec:
  skills:
  - name: search_book
    template: {text: "found: {{ .title }}"}
    inputSchema: {type: object, properties: {title: {type: string}}, required: [title]}
  - name: checkout_book
    template: {text: "checked out: {{ .title }}"}
    inputSchema: {type: object, properties: {title: {type: string}}, required: [title]}
  auth:
    serviceAccountTokens: {}   # tokens for reading-room.default.skillserver.cantus.dev
  authorization:
    rules:
    - tools: ["search_*"]
      serviceAccounts: ["default/*"]
    - tools: ["checkout_book"]
      serviceAccounts: ["default/librarian"]
YAML
  kubectl wait --for=condition=Ready skillserver/reading-room --timeout=60s
  kubectl get skillserver reading-room -o jsonpath='Verified: {.status.conditions[?(@.type=="Verified")].message}{"\n"}'
  local room audience visitor librarian
  room="$(kubectl get skillserver reading-room -o jsonpath='{.status.url}')"
  audience="reading-room.default.skillserver.cantus.dev"
  visitor="$(kubectl create token visitor --audience "${audience}")"
  librarian="$(kubectl create token librarian --audience "${audience}")"
  echo "-- the visitor lists only what it may call"
  inspector "${room}" --method tools/list --header "Authorization: Bearer ${visitor}" | grep '"name"'
  echo "-- the visitor searches"
  inspector "${room}" --method tools/call --tool-name search_book --tool-arg 'title="Dune"' --header "Authorization: Bearer ${visitor}"
  echo "-- the visitor tries to check out (refused)"
  inspector "${room}" --method tools/call --tool-name checkout_book --tool-arg 'title="Dune"' --header "Authorization: Bearer ${visitor}" || true
  echo "-- the librarian checks out"
  inspector "${room}" --method tools/call --tool-name checkout_book --tool-arg 'title="Dune"' --header "Authorization: Bearer ${librarian}"
  echo "-- a token for the API server's audience: HTTP $(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $(kubectl create token visitor)" -H 'Content-Type: application/json' -d '{}' "${room}")"
  echo "-- the visitor's service account is deleted; its token, still unexpired, is refused as the API server would refuse it"
  kubectl delete serviceaccount visitor
  local status=""
  for _ in $(seq 60); do
    status="$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer ${visitor}" -H 'Content-Type: application/json' \
      -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-06-18' \
      -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' "${room}")"
    [[ "${status}" == 401 ]] && break
    sleep 0.5
  done
  echo "   the visitor's token now: HTTP ${status}"

  discovery_search
  caller_credentials

  say "the demo keeps running"
  cat <<MSG
  export KUBECONFIG=${KUBECONFIG_PATH}
  kubectl get skillservers -o wide
  kubectl describe skillserver library
  kubectl describe remotetoolimport library-import
  kubectl describe skillserver gateway
  curl -sk -H "Authorization: Bearer \$(kubectl create token demo-agent --audience cantus.dev/catalog)" https://${catalog:-CATALOG}/v1/servers
  (cd test/mcp-peers/node_modules/@modelcontextprotocol/inspector-cli/build && node index.js ${url} --transport http --method tools/list)
  logs: .demo/manager.log, .demo/controlplane.log
  stop: make demo-down
MSG
}

case "${1:-up}" in
  up) up ;;
  down) down; echo "demo stopped" ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
