package controller

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/kubekit"
	"github.com/cantus-dev/cantus-operator/internal/testkit/mcpkit"
	"github.com/cantus-dev/cantus-operator/internal/tracing"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// receivedSpan is a span an OTLP receiver got, with the service that sent it.
type receivedSpan struct {
	service, namespace string
	span               *tracepb.Span
}

func (s receivedSpan) kind() tracepb.Span_SpanKind { return s.span.GetKind() }
func (s receivedSpan) id() string                  { return hex.EncodeToString(s.span.GetSpanId()) }
func (s receivedSpan) parent() string              { return hex.EncodeToString(s.span.GetParentSpanId()) }
func (s receivedSpan) trace() string               { return hex.EncodeToString(s.span.GetTraceId()) }

// otlpReceiver is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf), as a
// collector runs it.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []receivedSpan
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		export := &coltracepb.ExportTraceServiceRequest{}
		if err != nil || req.URL.Path != "/v1/traces" || proto.Unmarshal(body, export) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range export.GetResourceSpans() {
			attrs := map[string]string{}
			for _, kv := range rs.GetResource().GetAttributes() {
				attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					r.spans = append(r.spans, receivedSpan{service: attrs["service.name"], namespace: attrs["k8s.namespace.name"], span: s})
				}
			}
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	testkit.CloseAtEnd(t, srv)
	r.url = srv.URL
	return r
}

// of returns the spans of trace id received so far.
func (r *otlpReceiver) of(id string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.trace() == id {
			out = append(out, s)
		}
	}
	return out
}

func findSpan(spans []receivedSpan, name string, kind tracepb.Span_SpanKind) *receivedSpan {
	for i := range spans {
		if spans[i].span.GetName() == name && spans[i].kind() == kind {
			return &spans[i]
		}
	}
	return nil
}

// TestTracingFollowsACallThroughAGatewayPodToARemotePodAndItsBackend: with the
// operator's tracing env, the adapters it renders (run as their pods would run, the
// real adapter binary) export their spans to an OTLP receiver: one call through a
// gateway to a remote whose tool POSTs to a backend is one trace, under the span the
// client sent in traceparent: gateway server → gateway client → remote server → backend
// client, each the parent of the next. The collector's credentials in
// OTEL_EXPORTER_OTLP_HEADERS stay out of the Deployments.
func TestTracingFollowsACallThroughAGatewayPodToARemotePodAndItsBackend(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pods' filesystems are emulated with chroot, which needs root (CI and dev machines here run as root)")
	}
	g := NewWithT(t)
	ctx := context.Background()
	receiver := startOTLPReceiver(t)
	var backendSaw sync.Map
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendSaw.Store(r.Header.Get("traceparent"), true)
		_, _ = w.Write([]byte("shelf 7"))
	}))
	testkit.CloseAtEnd(t, backend)

	operatorEnv := map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
		"OTEL_EXPORTER_OTLP_HEADERS":  "authorization=Bearer collector-secret",
		"OTEL_BSP_SCHEDULE_DELAY":     "50",
	}
	kube := workload.NewKubernetes(k8sClient, "img", "cluster.local")
	kube.TracingEnv = tracing.AdapterEnv(func(k string) string { return operatorEnv[k] })
	servers := &SkillServerReconciler{Client: k8sClient, Runtime: kube}
	ns := kubekit.NewNamespace(t, k8sClient)
	kubekit.AllowLoopback(t, k8sClient, ns)

	// The remote: a SkillServer whose tool POSTs to the backend.
	remote := kubekit.NewSkillServer(ns, "shelves", cantusv1alpha1.Skill{
		Name: "locate", Description: "Where a book is.",
		InputSchema: &cantusv1alpha1.ToolInputSchema{Type: "object", Raw: []byte(`{"type":"object"}`)},
		HTTP:        &cantusv1alpha1.HTTPBackend{URL: backend.URL},
	})
	g.Expect(k8sClient.Create(ctx, remote)).To(Succeed())
	remoteDep := reconcileToDeployment(t, servers, remote)
	remotePod := startAsPod(t, ctx, remoteDep)

	imp := kubekit.ReconcileImport(t, k8sClient, importReconciler(), kubekit.NewImport(ns, "shelves", remotePod.BaseURL+"/mcp"))
	g.Expect(imp.Status.Tools).To(HaveLen(1), "the import is Ready with the remote's tool")

	gateway := kubekit.NewSkillServer(ns, "front-desk", kubekit.TemplateSkill("hello", "hi"))
	gateway.Spec.Imports = []cantusv1alpha1.SkillImport{{Name: "shelves", Prefix: "shelves_"}}
	g.Expect(k8sClient.Create(ctx, gateway)).To(Succeed())
	gatewayDep := reconcileToDeployment(t, servers, gateway)
	gatewayPod := startAsPod(t, ctx, gatewayDep)

	for _, dep := range []*appsv1.Deployment{remoteDep, gatewayDep} {
		env := map[string]string{}
		for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		g.Expect(env).To(HaveKeyWithValue("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url))
		g.Expect(env).To(HaveKeyWithValue("OTEL_SERVICE_NAME", "cantus-adapter"))
		g.Expect(env).To(HaveKeyWithValue("OTEL_RESOURCE_ATTRIBUTES", "k8s.namespace.name="+ns+",k8s.deployment.name="+dep.Name))
		raw, _ := json.Marshal(dep)
		g.Expect(string(raw)).NotTo(ContainSubstring("collector-secret"), "the collector's credentials are not in a tenant's Deployment")
	}

	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	res, err := mcpkit.CallTool(ctx, gatewayPod.BaseURL+"/mcp", "streamable-http", "shelves_locate", map[string]any{"title": "Dune"},
		map[string]string{"traceparent": "00-" + traceID + "-" + clientSpan + "-01"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mcpkit.ResultText(res)).To(Equal("shelf 7"))

	var gwServer, gwClient, remoteServer, backendClient *receivedSpan
	g.Eventually(func() []*receivedSpan {
		spans := receiver.of(traceID)
		gwServer = findSpan(spans, "tools/call shelves_locate", tracepb.Span_SPAN_KIND_SERVER)
		gwClient = findSpan(spans, "tools/call locate", tracepb.Span_SPAN_KIND_CLIENT)
		remoteServer = findSpan(spans, "tools/call locate", tracepb.Span_SPAN_KIND_SERVER)
		backendClient = findSpan(spans, "POST", tracepb.Span_SPAN_KIND_CLIENT)
		return []*receivedSpan{gwServer, gwClient, remoteServer, backendClient}
	}, 20*time.Second, 100*time.Millisecond).ShouldNot(ContainElement(BeNil()), "the four spans of the call reach the receiver")

	g.Expect(gwServer.parent()).To(Equal(clientSpan), "the client's traceparent is the gateway server span's parent")
	g.Expect(gwClient.parent()).To(Equal(gwServer.id()))
	g.Expect(remoteServer.parent()).To(Equal(gwClient.id()))
	g.Expect(backendClient.parent()).To(Equal(remoteServer.id()))
	g.Expect(gwServer.service).To(Equal("cantus-adapter"))
	g.Expect(gwServer.namespace).To(Equal(ns))
	_, sawIt := backendSaw.Load("00-" + traceID + "-" + backendClient.id() + "-01")
	g.Expect(sawIt).To(BeTrue(), "the backend got the trace context of the call to it")
}

// reconcileToDeployment reconciles ss once and returns the Deployment it rendered.
func reconcileToDeployment(t *testing.T, r *SkillServerReconciler, ss *cantusv1alpha1.SkillServer) *appsv1.Deployment {
	t.Helper()
	g := NewWithT(t)
	_, err := r.Reconcile(context.Background(), kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())
	dep := &appsv1.Deployment{}
	g.Expect(k8sClient.Get(context.Background(), crclient.ObjectKeyFromObject(ss), dep)).To(Succeed())
	return dep
}

// TestReconcileSpans: every reconcile is a span named for its controller, with the
// object and the outcome; a failed one carries the error.
func TestReconcileSpans(t *testing.T) {
	g := NewWithT(t)
	rec := tracetest.NewSpanRecorder()
	tracing.Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { tracing.Use(nil) })
	ns := kubekit.NewNamespace(t, k8sClient)
	ss := kubekit.NewSkillServer(ns, "traced", kubekit.TemplateSkill("hello", "hi"))
	g.Expect(k8sClient.Create(context.Background(), ss)).To(Succeed())
	r := traced("skillserver", &SkillServerReconciler{Client: k8sClient, Runtime: workload.NewKubernetes(k8sClient, "img", "cluster.local")})
	_, err := r.Reconcile(context.Background(), kubekit.ReconcileRequest(ss))
	g.Expect(err).NotTo(HaveOccurred())
	failing := traced("remotetoolimport", reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, errors.New("the API server is gone")
	}))
	_, err = failing.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "x"}})
	g.Expect(err).To(HaveOccurred())

	spans := rec.Ended()
	g.Expect(spans).To(HaveLen(2))
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes() {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	g.Expect(spans[0].Name()).To(Equal("reconcile skillserver"))
	g.Expect(attrs(spans[0])).To(And(HaveKeyWithValue("k8s.namespace.name", ns), HaveKeyWithValue("cantus.object.name", "traced"),
		HaveKeyWithValue("cantus.controller", "skillserver")))
	g.Expect(attrs(spans[0])).To(HaveKey("cantus.reconcile.outcome"))
	g.Expect(spans[1].Name()).To(Equal("reconcile remotetoolimport"))
	g.Expect(attrs(spans[1])).To(HaveKeyWithValue("cantus.reconcile.outcome", "error"))
	g.Expect(spans[1].Status().Code).To(Equal(codes.Error))
	g.Expect(spans[1].Status().Description).To(Equal("the API server is gone"))
}
