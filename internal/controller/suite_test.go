package controller

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/workload"
	"github.com/cantus-dev/cantus-operator/test/testenv"
)

var (
	restConfig *rest.Config
	k8sClient  crclient.WithWatch
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	// Reconciles take longer than gomega's default second on a busy 2-core machine;
	// a test that waits on the API server waits long enough not to flake.
	SetDefaultEventuallyTimeout(15 * time.Second)
	testenv.ExitUnderShort()
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	restConfig = cfg
	k8sClient, err = crclient.NewWithWatch(cfg, crclient.Options{Scheme: testenv.Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

// newTestManager returns a manager on the test control plane; several run one after
// another in one process, so controller names may repeat.
func newTestManager(t *testing.T) ctrl.Manager {
	t.Helper()
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 testenv.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		// The manager's own cache and client settings, so every test runs under them.
		Cache:  CacheOptions(),
		Client: ClientOptions(),
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	return mgr
}

// runManager runs mgr until the test ends.
func runManager(t *testing.T, mgr ctrl.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// startManager runs the SkillServer controller with the given runtime until the test ends.
func startManager(t *testing.T, rt workload.Runtime) {
	t.Helper()
	startManagerVerifying(t, rt, &MCPVerifier{})
}

// startManagerVerifying runs the SkillServer controller with a given verifier of the pods
// (nil: none); configure may set more of the reconciler.
func startManagerVerifying(t *testing.T, rt workload.Runtime, verifier ToolLister, configure ...func(*SkillServerReconciler)) {
	t.Helper()
	mgr := newTestManager(t)
	if kube, ok := rt.(*workload.Kubernetes); ok {
		kube.Client, kube.APIReader = ChildClient(mgr), mgr.GetAPIReader()
	}
	r := &SkillServerReconciler{Client: mgr.GetClient(), Runtime: rt, Recorder: mgr.GetEventRecorder("cantus-operator"), Verifier: verifier}
	if err := r.UseContentCache(mgr); err != nil {
		t.Fatalf("content cache: %v", err)
	}
	for _, c := range configure {
		c(r)
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatalf("set up controller: %v", err)
	}
	runManager(t, mgr)
}

func templateSkill(name, text string) cantusv1alpha1.Skill {
	return cantusv1alpha1.Skill{
		Name:        name,
		Description: "test skill " + name,
		InputSchema: &cantusv1alpha1.ToolInputSchema{Type: "object", Raw: []byte(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`)},
		Template:    &cantusv1alpha1.TemplateBackend{Text: text},
	}
}

func newSkillServer(ns, name string, skills ...cantusv1alpha1.Skill) *cantusv1alpha1.SkillServer {
	return &cantusv1alpha1.SkillServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       cantusv1alpha1.SkillServerSpec{Skills: skills},
	}
}

// getSkillServer returns a function for Eventually that reads a SkillServer afresh.
func getSkillServer(ctx context.Context, ns, name string) func() (*cantusv1alpha1.SkillServer, error) {
	return func() (*cantusv1alpha1.SkillServer, error) {
		ss := &cantusv1alpha1.SkillServer{}
		err := k8sClient.Get(ctx, crclient.ObjectKey{Namespace: ns, Name: name}, ss)
		return ss, err
	}
}

// haveCondition matches a SkillServer whose condition has the given status and reason.
func haveCondition(condType string, status metav1.ConditionStatus, reason string) OmegaMatcher {
	return WithTransform(func(ss *cantusv1alpha1.SkillServer) string {
		for _, c := range ss.Status.Conditions {
			if c.Type == condType {
				return fmt.Sprintf("%s/%s", c.Status, c.Reason)
			}
		}
		return "absent"
	}, Equal(fmt.Sprintf("%s/%s", status, reason)))
}

func reconcileRequest(obj crclient.Object) ctrl.Request {
	return ctrl.Request{NamespacedName: crclient.ObjectKeyFromObject(obj)}
}
