# cantus-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= ghcr.io/cantus-dev/cantus-operator:dev
FUZZTIME ?= 10s
CONTROLLER_GEN := go tool controller-gen
# golangci-lint is pinned in its own module (hack/tools) so that its dependencies never
# move the operator's; it is built once into bin/.
GOLANGCI_LINT := bin/golangci-lint
# Helm is pinned the same way, in a module of its own (hack/tools/helm).
HELM := bin/helm
# containerd 2 for the one-node cluster (image volumes need containerd >= 2.1; Debian
# ships 1.6), pinned in hack/tools/containerd; a cold build takes about 10 minutes here.
CONTAINERD := bin/containerd
CONTAINERD_VERSION = $(shell go -C hack/tools/containerd list -m -f '{{.Version}}' github.com/containerd/containerd/v2)
CHART := charts/cantus-operator
KUBECTL ?= kubectl

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs and RBAC from the code markers.
	$(CONTROLLER_GEN) crd rbac:roleName=cantus-operator paths=./api/... paths=./internal/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: chart
chart: manifests ## Copy the CRDs, RBAC rules and admission policies of config/ into the Helm chart (its files/ folder).
	rm -rf $(CHART)/files/crds $(CHART)/files/rbac $(CHART)/files/admission
	mkdir -p $(CHART)/files/crds $(CHART)/files/rbac $(CHART)/files/admission
	cp config/crd/bases/*.yaml $(CHART)/files/crds/
	cp config/rbac/role.yaml config/rbac/leader_election_role.yaml config/rbac/metrics_auth_role.yaml config/rbac/aggregated_roles.yaml $(CHART)/files/rbac/
	cp config/rbac/namespaced/role.yaml $(CHART)/files/rbac/namespaced_role.yaml
	cp config/rbac/namespaced/cluster/cluster_role.yaml $(CHART)/files/rbac/namespaced_cluster_role.yaml
	cp config/admission/restricted_workloads.yaml config/admission/own_objects.yaml config/admission/protect_params.yaml config/admission/approval_needs_approver.yaml $(CHART)/files/admission/

.PHONY: verify-gen
verify-gen: generate manifests chart ## Fail when generated files (the chart's copies included) differ from what is committed.
	@git diff --exit-code -- api config/crd config/rbac $(CHART)/files || { echo "generated files drifted: run 'make generate manifests chart' and commit"; exit 1; }
	@untracked="$$(git ls-files --others --exclude-standard -- config/crd config/rbac $(CHART)/files)"; \
		[[ -z "$${untracked}" ]] || { echo "generated files not committed: $${untracked}"; exit 1; }

.PHONY: verify-tidy
verify-tidy: ## Fail when go.mod or go.sum (the operator's or hack/tools') are not tidy.
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; exit 1; }
	@go -C hack/tools mod tidy -diff || { echo "hack/tools is not tidy: run 'go -C hack/tools mod tidy' and commit"; exit 1; }
	@go -C hack/tools/helm mod tidy -diff || { echo "hack/tools/helm is not tidy: run 'go -C hack/tools/helm mod tidy' and commit"; exit 1; }
	@go -C hack/tools/containerd mod tidy -diff || { echo "hack/tools/containerd is not tidy: run 'go -C hack/tools/containerd mod tidy' and commit"; exit 1; }

.PHONY: verify
verify: verify-gen verify-tidy lint helm-lint ## Every check that generated and module files are as committed, the linters, and the chart's lint.

$(GOLANGCI_LINT): hack/tools/go.mod hack/tools/go.sum
	go -C hack/tools build -o $(CURDIR)/$(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(HELM): hack/tools/helm/go.mod hack/tools/helm/go.sum
	go -C hack/tools/helm build -o $(CURDIR)/$(HELM) helm.sh/helm/v4/cmd/helm

# containerd and its runc shim, static (no btrfs snapshotter, which needs cgo); runc, the
# CNI plugins and iptables still come from Debian.
$(CONTAINERD): hack/tools/containerd/go.mod hack/tools/containerd/go.sum
	CGO_ENABLED=0 go -C hack/tools/containerd build -ldflags '-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)' \
		-o $(CURDIR)/bin/ github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2

.PHONY: helm-lint
helm-lint: $(HELM) ## helm lint the chart and render it with its defaults and with every option on.
	$(HELM) lint --strict $(CHART)
	$(HELM) template cantus-operator $(CHART) -n cantus-system >/dev/null
	$(HELM) template cantus-operator $(CHART) -n cantus-system --set serviceMonitor.enabled=true,replicas=2,catalog.tlsSecretName=catalog-tls,tracing.enabled=true,tracing.endpoint=http://otel-collector.observability:4318,tracing.sampler=parentbased_traceidratio,tracing.samplerArg=0.25,tracing.resourceAttributes.deployment\\.environment\\.name=prod,tracing.headersSecret.name=otel,tracing.headersSecret.key=headers >/dev/null
	$(HELM) template cantus-operator $(CHART) -n cantus-system --set 'watchNamespaces={team-a,team-b}',admissionPolicy.enabled=false >/dev/null

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (.golangci.yml): linters and gofmt/goimports.
	$(GOLANGCI_LINT) run ./...

.PHONY: lint-fix
lint-fix: $(GOLANGCI_LINT) ## Run golangci-lint and apply the fixes it knows, formatting included.
	$(GOLANGCI_LINT) run --fix ./...

.PHONY: fmt
fmt: ## go fmt.
	go fmt ./...

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: build
build: ## Build bin/manager and bin/adapter (static, as in the image).
	CGO_ENABLED=0 go build -o bin/manager ./cmd/manager
	CGO_ENABLED=0 go build -o bin/adapter ./cmd/adapter

.PHONY: envtest
envtest: ## Build (once) kube-apiserver and etcd; the last line is the KUBEBUILDER_ASSETS folder.
	@hack/envtest.sh

.PHONY: npm-peers
npm-peers: ## Install the pinned MCP peers from npm (TypeScript SDK, inspector, conformance).
	@hack/npm-peers.sh

.PHONY: test
test: verify vet build npm-peers ## Run every test: unit, envtest integration, real MCP peers.
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh | tail -n1)" CANTUS_ADAPTER_BIN="$(CURDIR)/bin/adapter" \
		go test ./... -count=1 -timeout 30m

.PHONY: test-unit
test-unit: ## The fast inner loop: go test -short ./..., no envtest, no npm peers, no node (1-2.5 min on 2 cores).
	go test -short ./... -count=1 -timeout 10m

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME each (default 10s); make test runs their seeds.
	@FUZZTIME="$(FUZZTIME)" hack/fuzz.sh

.PHONY: bench
bench: build ## Print the adapter's throughput and latency beside a bare mcp-go server (tools/call, and resources/read of a 64 KiB skill file), the gateway beside a direct call (tools/call, also to a remote tool that takes 1 ms; resources/read of a 64 KiB resource and prompts/get) and beside a bare reverse proxy, the memory tool's ops/s, what acting as each caller costs a gateway (cached token exchange against a static header, a cache miss, memory per caller at 10,000 callers), and a gateway's tools/call in each protocol era against a bare reverse proxy to a dual-era remote.
	go run ./hack/bench -hop
	go run ./hack/bench -only gateway -remote-delay 1ms
	go test -run '^$$' -bench . -benchtime 2s ./internal/memory/
	go test -run '^$$' -bench CallerCredentialsGateway -benchtime 1x ./internal/adapter/ | grep -v -e '^{' -e 'registered route'
	go test -run '^$$' -bench DualEraGateway -benchtime 1x ./internal/adapter/ | grep '^protocol'
	go test -run '^$$' -bench CallerCredentials -benchtime 2s ./internal/callercred/

QUERIES ?= hack/discoverybench/queries.jsonl

.PHONY: bench-discovery
bench-discovery: ## Print Search mode's recall@5 over a corpus of real tool definitions (harvested now from the npm servers pinned in test/mcp-peers/corpus, never committed) for the tasks in QUERIES (default hack/discoverybench/queries.jsonl; holdout.jsonl, holdout2.jsonl, holdout3.jsonl and holdout4.jsonl beside it were each written before the ranking they first measured: docs/benchmarks.md), the tools/list size against All mode, and find_tools' p50 at 1,000 tools.
	hack/discovery-corpus.sh bin/discovery-corpus.json >/dev/null
	go run ./hack/discoverybench -corpus bin/discovery-corpus.json -queries $(QUERIES)

.PHONY: scale-bench
scale-bench: build ## Print how the manager copes with 1,000 SkillServers and 1,000 imports on an embedded control plane: its write rate against the API server's, idle writes, RSS.
	go run ./hack/scalebench -servers 1000 -imports 1000 -refresh 30s -idle 1m

##@ Running

.PHONY: demo
demo: build npm-peers ## Embedded control plane + operator (local runtime) + samples + a real MCP call.
	@hack/demo.sh up

.PHONY: demo-down
demo-down: ## Stop what `make demo` or `make demo-cluster` started; the cluster's node leaves nothing behind.
	@hack/demo.sh down
	@hack/cluster.sh down

.PHONY: doc-commands
doc-commands: ## Run the sh blocks of README.md, ARCHITECTURE.md, CONTRIBUTING.md and docs/*.md against make demo; blocks marked <!-- not run: reason --> are listed, not run.
	@hack/doc-commands.sh

.PHONY: demo-cluster
demo-cluster: npm-peers ## A real one-node cluster (root): the operator as a pod, the samples, MCP calls through Services.
	@hack/cluster.sh demo

.PHONY: test-cluster
test-cluster: npm-peers ## End-to-end tests on a real one-node cluster (root); starts and removes the node.
	@hack/cluster.sh test

.PHONY: run
run: build ## Run the operator against the current kubeconfig (kubernetes runtime).
	bin/manager

.PHONY: install
install: ## Install the CRDs into the current cluster.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs (and every SkillServer) from the current cluster.
	$(KUBECTL) delete -k config/crd

.PHONY: deploy
deploy: ## Deploy the operator to the current cluster with IMG (the manager and the adapter pods it creates).
	@hack/deploy.sh "$(IMG)" | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove the operator from the current cluster.
	@hack/deploy.sh "$(IMG)" | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine, which CI here lacks).
	docker build -t $(IMG) .
