//go:build cluster

package cluster

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mcpgo "github.com/mark3labs/mcp-go/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// span is one span an OTLP receiver got and the service that sent it.
type span struct {
	service string
	s       *tracepb.Span
}

func (s span) id() string     { return hex.EncodeToString(s.s.GetSpanId()) }
func (s span) parent() string { return hex.EncodeToString(s.s.GetParentSpanId()) }

// otlpReceiver is an OTLP/HTTP trace receiver, as a collector runs one, listening on
// every interface of this machine so that pods reach it by the node's address.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]span // by trace id
}

// startReceiver serves handler on every interface and returns its port.
func startReceiver(t *testing.T, handler http.Handler) int {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func (r *otlpReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	export := &coltracepb.ExportTraceServiceRequest{}
	if err != nil || proto.Unmarshal(body, export) != nil {
		http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range export.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				id := hex.EncodeToString(s.GetTraceId())
				r.spans[id] = append(r.spans[id], span{service: service, s: s})
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *otlpReceiver) find(traceID, name string, kind tracepb.Span_SpanKind) *span {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans[traceID] {
		if s.s.GetName() == name && s.s.GetKind() == kind {
			return &s
		}
	}
	return nil
}

func (r *otlpReceiver) services() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, spans := range r.spans {
		for _, s := range spans {
			out[s.service]++
		}
	}
	return out
}

// nodeAddress is the node's InternalIP, where pods reach this machine.
func nodeAddress(t *testing.T, ctx context.Context) string {
	t.Helper()
	var nodes corev1.NodeList
	if err := k8s.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, a := range nodes.Items[0].Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatal("the node has no InternalIP")
	return ""
}

func kubectl(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfigPath()}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestTracingThroughServices: with tracing turned on for the operator (its OTEL_*
// environment, as the chart's tracing values set it), the SkillServer pods it creates
// send their spans to an OTLP receiver this test runs: a call through a gateway's
// Service to a remote SkillServer's Service whose tool POSTs to a backend is one trace
// under the span the caller sent, gateway server → gateway client → remote server →
// backend client. The manager's reconciles arrive as cantus-operator spans.
func TestTracingThroughServices(t *testing.T) {
	ctx := testkit.Context(t, clusterTestTimeout)
	node := nodeAddress(t, ctx)
	receiver := &otlpReceiver{spans: map[string][]span{}}
	receiverPort := startReceiver(t, receiver)
	var backendSaw sync.Map
	backendPort := startReceiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendSaw.Store(r.Header.Get("traceparent"), true)
		_, _ = w.Write([]byte("shelf 7"))
	}))

	// Turn tracing on for the operator, and off again afterwards: each rolls the manager
	// and then every adapter (their env changes).
	kubectl(t, "-n", "cantus-system", "set", "env", "deployment/cantus-operator",
		fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://%s:%d", node, receiverPort), "OTEL_BSP_SCHEDULE_DELAY=200")
	t.Cleanup(func() {
		kubectl(t, "-n", "cantus-system", "set", "env", "deployment/cantus-operator", "OTEL_EXPORTER_OTLP_ENDPOINT-", "OTEL_BSP_SCHEDULE_DELAY-")
		kubectl(t, "-n", "cantus-system", "rollout", "status", "deployment/cantus-operator", "--timeout=180s")
	})
	kubectl(t, "-n", "cantus-system", "rollout", "status", "deployment/cantus-operator", "--timeout=180s")

	ns := restrictedNamespace(t, ctx)
	remote := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "shelves", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{Skills: []cantusv1alpha1.Skill{{
			Name: "locate", Description: "Where a book is.",
			InputSchema: &cantusv1alpha1.ToolInputSchema{Type: "object", Raw: []byte(`{"type":"object"}`)},
			HTTP:        &cantusv1alpha1.HTTPBackend{URL: fmt.Sprintf("http://%s:%d/locate", node, backendPort)},
		}}},
	}
	if err := k8s.Create(ctx, remote); err != nil {
		t.Fatal(err)
	}
	remote = waitReady(t, ctx, client.ObjectKeyFromObject(remote))
	remoteURL := serviceURL(t, ctx, remote)
	remoteHost := strings.Split(strings.TrimPrefix(remoteURL, "http://"), ":")[0]
	policy := &cantusv1alpha1.ToolSourcePolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-shelves"},
		Spec: cantusv1alpha1.ToolSourcePolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Hosts:             []string{remoteHost},
		},
	}
	if err := k8s.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), policy) })
	imp := &cantusv1alpha1.RemoteToolImport{
		ObjectMeta: metav1.ObjectMeta{Name: "shelves", Namespace: ns},
		Spec:       cantusv1alpha1.RemoteToolImportSpec{Transport: cantusv1alpha1.ImportTransportStreamableHTTP, URL: remoteURL},
	}
	if err := k8s.Create(ctx, imp); err != nil {
		t.Fatal(err)
	}
	waitImportReady(t, ctx, client.ObjectKeyFromObject(imp))
	gateway := &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Name: "front-desk", Namespace: ns},
		Spec: cantusv1alpha1.SkillServerSpec{
			Skills:  []cantusv1alpha1.Skill{templateSkill("hello", "hi")},
			Imports: []cantusv1alpha1.SkillImport{{Name: "shelves", Prefix: "shelves_"}},
		},
	}
	if err := k8s.Create(ctx, gateway); err != nil {
		t.Fatal(err)
	}
	gateway = waitReady(t, ctx, types.NamespacedName{Namespace: ns, Name: "front-desk"})

	const traceID, callerSpan = "5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7"
	tr, err := transport.NewStreamableHTTP(serviceURL(t, ctx, gateway), transport.WithHTTPHeaders(map[string]string{"traceparent": "00-" + traceID + "-" + callerSpan + "-01"}))
	if err != nil {
		t.Fatal(err)
	}
	c := mcpgo.NewClient(tr)
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	initReq := mcp.InitializeRequest{}
	initReq.Params.ProtocolVersion = "2025-06-18"
	initReq.Params.ClientInfo = mcp.Implementation{Name: "cluster-test", Version: "0"}
	if _, err := c.Initialize(ctx, initReq); err != nil {
		t.Fatal(err)
	}
	text, err := callTool(ctx, c, "shelves_locate", map[string]any{})
	if err != nil || text != "shelf 7" {
		t.Fatalf("call through the gateway: %q, %v", text, err)
	}

	var gwServer, gwClient, remoteServer, backendClient *span
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		gwServer = receiver.find(traceID, "tools/call shelves_locate", tracepb.Span_SPAN_KIND_SERVER)
		gwClient = receiver.find(traceID, "tools/call locate", tracepb.Span_SPAN_KIND_CLIENT)
		remoteServer = receiver.find(traceID, "tools/call locate", tracepb.Span_SPAN_KIND_SERVER)
		backendClient = receiver.find(traceID, "POST", tracepb.Span_SPAN_KIND_CLIENT)
		return gwServer != nil && gwClient != nil && remoteServer != nil && backendClient != nil, nil
	})
	if err != nil {
		t.Fatalf("the call's four spans did not all arrive: gateway server %v, gateway client %v, remote server %v, backend client %v; spans by service %v",
			gwServer != nil, gwClient != nil, remoteServer != nil, backendClient != nil, receiver.services())
	}
	for _, link := range []struct {
		child  *span
		parent string
		what   string
	}{
		{gwServer, callerSpan, "the gateway's server span under the caller's"},
		{gwClient, gwServer.id(), "the gateway's client span under its server span"},
		{remoteServer, gwClient.id(), "the remote's server span under the gateway's client span"},
		{backendClient, remoteServer.id(), "the backend's client span under the remote's server span"},
	} {
		if link.child.parent() != link.parent {
			t.Errorf("%s: parent %s, want %s", link.what, link.child.parent(), link.parent)
		}
	}
	if gwServer.service != "cantus-adapter" {
		t.Errorf("the gateway's spans come from service %q, want cantus-adapter", gwServer.service)
	}
	if _, ok := backendSaw.Load("00-" + traceID + "-" + backendClient.id() + "-01"); !ok {
		t.Error("the backend did not get the trace context of the call to it")
	}
	if receiver.services()["cantus-operator"] == 0 {
		t.Errorf("no span of the manager arrived: %v", receiver.services())
	}
}
