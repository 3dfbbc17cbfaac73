//go:build cluster

// Package cluster holds the end-to-end tests that need a real node: `make test-cluster`
// starts one (hack/cluster.sh), deploys the operator as a pod, runs these tests with
// -tags cluster and removes the node. They talk to the cluster through .demo/kubeconfig
// (or CANTUS_CLUSTER_KUBECONFIG) and reach Services by their ClusterIP, since the node
// has no cluster DNS.
package cluster

import (
	"context"
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
	"github.com/cantus-dev/cantus-operator/internal/testenv"
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

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

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
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(tr)
	if err := c.Start(ctx); err != nil {
		t.Fatalf("starting a client of %s: %v", url, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "cluster-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize %s: %v", url, err)
	}
	return c
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
