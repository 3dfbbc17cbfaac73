//go:build cluster

// Package cluster holds the end-to-end tests that need a real node: `make test-cluster`
// starts one (hack/cluster.sh), deploys the operator as a pod, runs these tests with
// -tags cluster and removes the node. They talk to the cluster through .demo/kubeconfig
// (or CANTUS_CLUSTER_KUBECONFIG) and reach Services by their ClusterIP, since the node
// has no cluster DNS.
package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

// k8s is the admin client of the cluster under test, set by TestMain.
var k8s client.Client

// usedNamespaces collects the namespaces the tests made, for the cluster-wide checks.
var usedNamespaces []string

const (
	readyTimeout = 4 * time.Minute
	managerUser  = "system:serviceaccount:cantus-system:cantus-operator"
)

func TestMain(m *testing.M) {
	if err := connect(); err != nil {
		// Never a silent skip: a run that cannot reach the node fails and says why.
		fmt.Fprintf(os.Stderr, "cluster tests need a running one-node cluster (make test-cluster starts one): %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func kubeconfigPath() string {
	if p := os.Getenv("CANTUS_CLUSTER_KUBECONFIG"); p != "" {
		return p
	}
	root, _ := testenv.RepoRoot()
	return filepath.Join(root, ".demo", "kubeconfig")
}

func connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath())
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfigPath(), err)
	}
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	var nodes corev1.NodeList
	if err := k8s.List(context.Background(), &nodes); err != nil {
		return fmt.Errorf("listing nodes at %s: %w", cfg.Host, err)
	}
	if len(nodes.Items) == 0 {
		return fmt.Errorf("no node registered at %s", cfg.Host)
	}
	return nil
}

// clusterTestTimeout bounds each test on the node: pods pull images and start for real.
const clusterTestTimeout = 10 * time.Minute

// restrictedNamespace makes a namespace where the API server's PodSecurity admission
// enforces the restricted profile on every pod the operator creates.
func restrictedNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "cluster-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:min(20, len(t.Name()))] + "-",
		Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	usedNamespaces = append(usedNamespaces, ns.Name)
	return ns.Name
}

func templateSkill(name, text string) cantusv1alpha1.Skill {
	return cantusv1alpha1.Skill{
		Name:        name,
		Description: "A cluster test skill.",
		Template:    &cantusv1alpha1.TemplateBackend{Text: text},
	}
}

func waitReady(t *testing.T, ctx context.Context, key types.NamespacedName) *cantusv1alpha1.SkillServer {
	t.Helper()
	var ss cantusv1alpha1.SkillServer
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, key, &ss); err != nil {
			return false, nil
		}
		c := apimeta.FindStatusCondition(ss.Status.Conditions, cantusv1alpha1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == ss.Generation, nil
	})
	if err != nil {
		t.Fatalf("skillserver %s not Ready: conditions %+v", key, ss.Status.Conditions)
	}
	return &ss
}

// serviceURL is the SkillServer's status.url with its cluster DNS name replaced by the
// Service's ClusterIP (this machine has no cluster DNS).
func serviceURL(t *testing.T, ctx context.Context, ss *cantusv1alpha1.SkillServer) string {
	t.Helper()
	var svc corev1.Service
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ss.Namespace, Name: ss.Name}, &svc); err != nil {
		t.Fatalf("service of %s: %v", ss.Name, err)
	}
	host := strings.TrimPrefix(ss.Status.URL, "http://")
	host, _, _ = strings.Cut(host, ":")
	return strings.Replace(ss.Status.URL, host, svc.Spec.ClusterIP, 1)
}

func mcpClient(t *testing.T, ctx context.Context, url string) *mcpclient.Client {
	t.Helper()
	c, err := newMCPClient(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newMCPClient starts and initializes an MCP client of url (streamable HTTP).
func newMCPClient(ctx context.Context, url string) (*mcpclient.Client, error) {
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		return nil, err
	}
	c := mcpclient.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("starting a client of %s: %w", url, err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "cluster-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("initialize %s: %w", url, err)
	}
	return c, nil
}

// waitOnlyNewPods waits until the SkillServer's pods are its replicas, all ready and none
// terminating: the old pods of a rollout have drained and exited.
func waitOnlyNewPods(t *testing.T, ctx context.Context, ns, name string, ss *cantusv1alpha1.SkillServer) {
	t.Helper()
	want := 1
	if ss.Spec.Replicas != nil {
		want = int(*ss.Spec.Replicas)
	}
	var pods corev1.PodList
	err := wait.PollUntilContextTimeout(ctx, time.Second, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name}); err != nil {
			return false, nil
		}
		return len(pods.Items) == want && runningPods(pods.Items) == want, nil
	})
	if err != nil {
		t.Fatalf("%s/%s: want %d ready pods and no other, have %d", ns, name, want, len(pods.Items))
	}
}

// callTool returns the text of a tool call, failing the test on a transport error.
func callTool(ctx context.Context, c *mcpclient.Client, name string, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", fmt.Errorf("calling %s: %w", name, err)
	}
	var parts []string
	for _, content := range res.Content {
		if text, ok := mcp.AsTextContent(content); ok {
			parts = append(parts, text.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s returned an error result: %s", name, strings.Join(parts, "\n"))
	}
	return strings.Join(parts, "\n"), nil
}

// auditEvent is the part of an API server audit event the tests read.
type auditEvent struct {
	Verb           string    `json:"verb"`
	RequestURI     string    `json:"requestURI"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	UserAgent      string    `json:"userAgent"`
	User           struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code    int `json:"code"`
		Details struct {
			Causes []struct {
				Reason string `json:"reason"`
			} `json:"causes"`
		} `json:"details"`
	} `json:"responseStatus"`
}

// forbiddenByRBAC says whether the request was refused for want of a permission, not
// because its namespace was being deleted (which the API server also answers with 403).
func (ev auditEvent) forbiddenByRBAC() bool {
	if ev.ResponseStatus.Code != 403 {
		return false
	}
	for _, c := range ev.ResponseStatus.Details.Causes {
		if c.Reason == "NamespaceTerminating" {
			return false
		}
	}
	return true
}

// managerRequests reads every request of the operator's service account from the audit
// log hack/cluster.sh makes the API server write.
func managerRequests(t *testing.T) []auditEvent {
	t.Helper()
	return requestsOf(t, managerUser)
}

// requestsOf reads every request of user (a service account the audit policy of
// hack/cluster.sh names) from the audit log.
func requestsOf(t *testing.T, user string) []auditEvent {
	t.Helper()
	root, _ := testenv.RepoRoot()
	path := filepath.Join(root, ".demo", "cluster", "audit.log")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the audit log hack/cluster.sh writes: %v", err)
	}
	defer f.Close()
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev auditEvent
		// The test that acts with the operator's credentials on purpose is not the manager.
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.User.Username == user && ev.UserAgent != operatorCredentialsTestAgent {
			out = append(out, ev)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	return out
}

// listServersAndImports lists every SkillServer and RemoteToolImport of the cluster.
func listServersAndImports(t *testing.T, ctx context.Context) (cantusv1alpha1.SkillServerList, cantusv1alpha1.RemoteToolImportList) {
	t.Helper()
	var servers cantusv1alpha1.SkillServerList
	var imports cantusv1alpha1.RemoteToolImportList
	if err := k8s.List(ctx, &servers); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &imports); err != nil {
		t.Fatal(err)
	}
	return servers, imports
}
