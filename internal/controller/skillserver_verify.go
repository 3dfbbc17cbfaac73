package controller

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	ctrl "sigs.k8s.io/controller-runtime"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/definition"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// MCPVerifier lists the tools a SkillServer's pods serve, as an agent would: an MCP
// initialize and tools/list through the Service. A Deployment's availability only says
// that the readiness probe passed; this says the pods answer MCP with the right tools,
// defined as rendered.
type MCPVerifier struct {
	// Timeout bounds one verification; a server that does not answer within it is
	// retried later and never holds a reconcile worker longer.
	Timeout time.Duration
	// Dial, when set, replaces the network dialer (tests stand in for kube-proxy).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultVerifyTimeout bounds one verification of a SkillServer.
const DefaultVerifyTimeout = 5 * time.Second

// VerifyTarget is where and how to reach one SkillServer's pods.
type VerifyTarget struct {
	URL       string
	Transport string
	// Headers carry the bearer token when the SkillServer requires one.
	Headers map[string]string
	// Skills and Prompts ask a ContentLister to list them.
	Skills, Prompts bool
}

// ListTools returns the tools the server lists, each with its entry as sent.
func (v *MCPVerifier) ListTools(ctx context.Context, target VerifyTarget) ([]mcpclient.Tool, error) {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = DefaultVerifyTimeout
	}
	res, err := mcpclient.Probe(ctx, mcpclient.Options{
		URL:       target.URL,
		Transport: target.Transport,
		Headers:   target.Headers,
		Timeout:   timeout,
		Dial:      v.Dial,
	})
	if err != nil {
		return nil, err
	}
	// A gateway lists a tool its remote serves only in 2026-07-28 to callers of that
	// era alone: the served tools are both eras' lists, by name.
	return catalogOf(res).tools, nil
}

// verifyRetry is how long to wait before verifying again a server that failed: half as
// long as it has been failing, within bounds, so that a Service whose endpoints are a
// second late is retried at once and a broken server costs a probe a minute. Changes to
// the Deployment (pods becoming ready) trigger a verification without waiting.
func verifyRetry(failingSince time.Time, now time.Time) time.Duration {
	const minRetry, maxRetry = 2 * time.Second, time.Minute
	return min(max(now.Sub(failingSince)/2, minRetry), maxRetry)
}

// alreadyVerified says whether the pods were verified for this very config at this URL,
// so that neither a resync nor an operator restart probes a server nothing changed.
func alreadyVerified(before *cantusv1alpha1.SkillServer, configHash, url string) bool {
	c := apimeta.FindStatusCondition(before.Status.Conditions, cantusv1alpha1.ConditionVerified)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == before.Generation &&
		before.Status.ConfigHash == configHash && before.Status.URL == url
}

// verifyTarget is how the operator reaches a SkillServer's pods, with the first of its
// static bearer tokens when it has them (the others are older or newer ones).
func (r *SkillServerReconciler) verifyTarget(ctx context.Context, ss *cantusv1alpha1.SkillServer, obs workload.Observation) (VerifyTarget, error) {
	target := VerifyTarget{URL: obs.ProbeURL, Transport: string(ss.Spec.Transport)}
	ref := ss.Spec.BearerTokenRef()
	if ref == nil || !operatorListsEveryTool(ss) {
		return target, nil
	}
	tokens, err := secretValue(ctx, r.Client, ss.Namespace, *ref)
	if err != nil {
		return target, fmt.Errorf("read the bearer token to verify the server: %w", err)
	}
	token, _, _ := strings.Cut(strings.TrimSpace(tokens), "\n")
	target.Headers = map[string]string{"Authorization": "Bearer " + strings.TrimSpace(token)}
	return target, nil
}

// operatorListsEveryTool says whether the operator can list every tool the server
// serves: with no auth, or with a static token and no authorization rules. Otherwise
// only the callers' own tokens open it, and each sees only the tools it may call.
func operatorListsEveryTool(ss *cantusv1alpha1.SkillServer) bool {
	return ss.Spec.Auth == nil || (ss.Spec.BearerTokenRef() != nil && ss.Spec.Authorization == nil)
}

// verifyIfNeeded checks the pods once they are available and the config changed since
// they were last verified. cfg is the rendered config, whose definitions the pods must
// serve. It returns how long to wait before checking again, zero when nothing needs a
// retry.
func (r *SkillServerReconciler) verifyIfNeeded(ctx context.Context, ss *cantusv1alpha1.SkillServer, obs workload.Observation, cfg *adapterconfig.Config, verified bool) time.Duration {
	switch {
	case r.Verifier == nil || verified:
		return 0
	case !obs.Available:
		setCondition(ss, cantusv1alpha1.ConditionVerified, metav1.ConditionUnknown, cantusv1alpha1.ReasonNotVerified,
			"the pods are verified through the Service once they are available")
		return 0
	}
	return r.verify(ctx, ss, obs, cfg)
}

// verify checks the pods through the Service and records the answer in Verified: the
// tools they list must be the ones in the status, defined as cfg defines them. It
// returns how long to wait before checking again, zero when the check passed.
func (r *SkillServerReconciler) verify(ctx context.Context, ss *cantusv1alpha1.SkillServer, obs workload.Observation, cfg *adapterconfig.Config) time.Duration {
	if obs.ProbeURL == "" {
		return r.notVerified(ss, cantusv1alpha1.ReasonNotAnswering, "the Service has no cluster IP yet")
	}
	target, err := r.verifyTarget(ctx, ss, obs)
	if err != nil {
		return r.notVerified(ss, cantusv1alpha1.ReasonNotVerified, err.Error())
	}
	if !operatorListsEveryTool(ss) {
		return r.verifyAsksForToken(ctx, ss, target)
	}
	served, err := r.Verifier.ListTools(ctx, target)
	ctrl.LoggerFrom(ctx).V(1).Info("verified the pods through the Service", "url", obs.ProbeURL, "tools", len(served), "error", err)
	if err != nil {
		return r.notVerified(ss, cantusv1alpha1.ReasonNotAnswering, fmt.Sprintf("no MCP answer from the adapter at %s: %v", obs.ProbeURL, err))
	}
	want, got := sets.New(listedToolNames(ss, cfg)...), sets.New(servedNames(served)...)
	if !want.Equal(got) {
		missing, extra := sets.List(want.Difference(got)), sets.List(got.Difference(want))
		return r.notVerified(ss, cantusv1alpha1.ReasonToolsMismatch, toolsMismatchMessage(len(served), missing, extra))
	}
	rendered, err := renderedDefinitionsOf(cfg)
	if err != nil {
		return r.notVerified(ss, cantusv1alpha1.ReasonNotVerified, err.Error())
	}
	if msg := definitionsMismatchMessage(definitionDifferences(definition.ToolKind, rendered.tools, servedToolDefinitions(served))); msg != "" {
		return r.notVerified(ss, cantusv1alpha1.ReasonDefinitionsMismatch, msg)
	}
	reason, msg, ok := r.verifyContent(ctx, ss, target, rendered)
	if !ok {
		return r.notVerified(ss, reason, msg)
	}
	setCondition(ss, cantusv1alpha1.ConditionVerified, metav1.ConditionTrue, cantusv1alpha1.ReasonToolsServed,
		fmt.Sprintf("the adapter answered MCP initialize and tools/list at %s with the %d expected tools, defined as rendered%s", obs.ProbeURL, len(served), msg))
	return 0
}

// verifyAsksForToken checks a server whose tools only callers' own tokens open: an
// anonymous tools/list must be refused with 401, which also shows that the pods answer
// over HTTP with auth on.
func (r *SkillServerReconciler) verifyAsksForToken(ctx context.Context, ss *cantusv1alpha1.SkillServer, target VerifyTarget) time.Duration {
	served, err := r.Verifier.ListTools(ctx, target)
	ctrl.LoggerFrom(ctx).V(1).Info("verified that the pods ask for a token", "url", target.URL, "error", err)
	switch {
	case err == nil:
		return r.notVerified(ss, cantusv1alpha1.ReasonNotVerified, fmt.Sprintf(
			"the adapter at %s listed %d tools to a caller without a token although spec.auth asks for one; pods that still run an older config pick up the new one within a minute or two", target.URL, len(served)))
	case mcpclient.ReasonOf(err) != mcpclient.ReasonUnauthorized:
		return r.notVerified(ss, cantusv1alpha1.ReasonNotAnswering, fmt.Sprintf("no MCP answer from the adapter at %s: %v", target.URL, err))
	}
	setCondition(ss, cantusv1alpha1.ConditionVerified, metav1.ConditionTrue, cantusv1alpha1.ReasonAsksForToken,
		fmt.Sprintf("the adapter at %s refuses callers without a token; the tools each caller may use are listed to it with its own token", target.URL))
	return 0
}

func (r *SkillServerReconciler) notVerified(ss *cantusv1alpha1.SkillServer, reason, message string) time.Duration {
	setCondition(ss, cantusv1alpha1.ConditionVerified, metav1.ConditionFalse, reason, message)
	c := apimeta.FindStatusCondition(ss.Status.Conditions, cantusv1alpha1.ConditionVerified)
	return verifyRetry(c.LastTransitionTime.Time, time.Now())
}

func toolsMismatchMessage(served int, missing, extra []string) string {
	parts := []string{fmt.Sprintf("the adapter answers MCP but lists %d tools that are not the ones the spec asks for", served)}
	if len(missing) > 0 {
		parts = append(parts, "missing: "+listAtMost(missing, 10, ", "))
	}
	if len(extra) > 0 {
		parts = append(parts, "not expected: "+listAtMost(extra, 10, ", "))
	}
	parts = append(parts, "pods that still run an older config pick up the new one within a minute or two")
	return strings.Join(parts, "; ")
}

func servedNames(tools []mcpclient.Tool) []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

func toolNames(tools []cantusv1alpha1.ServedTool) []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}
