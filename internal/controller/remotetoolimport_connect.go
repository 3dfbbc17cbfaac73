package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/connect"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/internal/policy"
)

// ConnectSettings are the operator's connect endpoints, for imports in connect mode
// (spec.callerCredentials.connect).
type ConnectSettings struct {
	// BaseURL is the operator's public HTTPS base URL (--connect-base-url); without it,
	// only pre-registered clients can be used.
	BaseURL string
	// Counter counts imports' connected accounts for their status and metrics.
	Counter *connect.Counter
	// RootCAs, when set, are the CAs TLS to authorization servers trusts (tests); nil:
	// the system's.
	RootCAs *x509.CertPool
	// ProbeTokens gives a probe identity's access token.
	ProbeTokens ProbeTokens
}

// connectCheck is what a probe found of an import's authorization server.
type connectCheck struct {
	metadata connect.ServerMetadata
	client   string
}

// checkConnect reads the authorization server's metadata of an import in connect mode
// (configured, or discovered from the remote's protected-resource metadata) through
// the policy's dialer, and holds each of its endpoints to the policy and to https away
// from loopback: users' browsers and the operator send codes and tokens there.
func (r *RemoteToolImportReconciler) checkConnect(ctx context.Context, checker *policy.Checker, imp *cantusv1alpha1.RemoteToolImport, allowed policy.Decision) (policy.Decision, *connectCheck) {
	cc := imp.Spec.CallerCredentials
	if cc == nil || cc.Connect == nil {
		return allowed, nil
	}
	if r.Connect == nil {
		return policy.Decision{Reason: cantusv1alpha1.ReasonConnectUnavailable, Message: "spec.callerCredentials.connect needs the operator's connect endpoints, which are served on its catalog listener, and the catalog is off (--catalog-bind-address=0)"}, nil
	}
	check := &connectCheck{client: cantusv1alpha1.ConnectClientPreRegistered}
	if cc.Connect.Client == nil && r.Connect.BaseURL == "" {
		return policy.Decision{Reason: cantusv1alpha1.ReasonConnectClientRequired, Message: "spec.callerCredentials.connect has no client, and the operator has no public base URL (--connect-base-url, chart value connect.baseURL) to serve its Client ID Metadata Document at, or to register a client with: register a client at the authorization server and set spec.callerCredentials.connect.client"}, nil
	}
	if issuer := cc.Connect.AuthorizationServer; issuer != "" {
		if d := checker.CheckTokenEndpoint(ctx, issuer); !d.Allowed {
			return refuseAuthorizationServer("spec.callerCredentials.connect.authorizationServer", d), nil
		}
	}
	discoverCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	md, err := connect.Discover(discoverCtx, r.connectHTTPClient(checker), imp.Spec.URL, cc.Connect.AuthorizationServer)
	if err != nil {
		return policy.Decision{Reason: cantusv1alpha1.ReasonAuthorizationServerUnknown, Message: err.Error()}, nil
	}
	if cc.Connect.Client == nil {
		check.client = chooseClient(md)
	}
	if check.client != cantusv1alpha1.ConnectClientDynamicRegistration {
		md.RegistrationEndpoint = ""
	}
	endpoints := map[string]string{"issuer": md.Issuer, "authorization_endpoint": md.AuthorizationEndpoint, "token_endpoint": md.TokenEndpoint,
		"revocation_endpoint": md.RevocationEndpoint, "registration_endpoint": md.RegistrationEndpoint}
	for _, field := range []string{"issuer", "authorization_endpoint", "token_endpoint", "revocation_endpoint", "registration_endpoint"} {
		if endpoints[field] == "" {
			continue
		}
		if d := checker.CheckTokenEndpoint(ctx, endpoints[field]); !d.Allowed {
			return refuseAuthorizationServer("the authorization server's "+field, d), nil
		}
	}
	check.metadata = md
	return allowed, check
}

// chooseClient is the client of an import without a pre-registered one: the operator's
// Client ID Metadata Document, unless the server does not say it takes such documents
// and offers dynamic client registration (RFC 7591).
func chooseClient(md connect.ServerMetadata) string {
	if !md.MetadataDocuments && md.RegistrationEndpoint != "" {
		return cantusv1alpha1.ConnectClientDynamicRegistration
	}
	return cantusv1alpha1.ConnectClientMetadataDocument
}

func refuseAuthorizationServer(what string, d policy.Decision) policy.Decision {
	return policy.Decision{Reason: cantusv1alpha1.ReasonAuthorizationServerNotAllowed, Message: fmt.Sprintf("%s is not allowed (%s): %s", what, d.Reason, d.Message)}
}

// connectHTTPClient reads metadata only from addresses the policy allows.
func (r *RemoteToolImportReconciler) connectHTTPClient(checker *policy.Checker) *http.Client {
	transport := &http.Transport{
		DialContext:         checker.DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: r.Connect.RootCAs},
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &http.Client{Transport: transport, Timeout: 15 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		return checker.CheckRedirect(req.URL)
	}}
}

// setConnectStatus records what the probe found of the authorization server and the
// counts of connected accounts.
func (r *RemoteToolImportReconciler) setConnectStatus(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, check *connectCheck) error {
	status := imp.Status.CallerCredentials
	if status == nil || check == nil {
		return nil
	}
	md := check.metadata
	status.AuthorizationServer = md.Issuer
	status.AuthorizationServerChecked = true
	status.AuthorizationServerDiscovered = md.Discovered
	status.Endpoints = &cantusv1alpha1.AuthorizationServerEndpoints{Authorization: md.AuthorizationEndpoint, Token: md.TokenEndpoint,
		Revocation: md.RevocationEndpoint, Registration: md.RegistrationEndpoint}
	status.Client = check.client
	if r.Connect.Counter == nil {
		return nil
	}
	counts, err := r.Connect.Counter.Count(ctx, imp)
	if err != nil {
		return err
	}
	status.Connected, status.ReconnectNeeded, status.FailedRefreshes = counts.Connected, counts.ReconnectNeeded, counts.FailedRefreshes
	return nil
}

// ProbeTokens gives the access token of a caller's connected account, refreshed if
// needed (connect.Handler).
type ProbeTokens interface {
	AccessToken(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, caller string) (string, error)
}

// withProbeIdentity makes the probe act as spec.callerCredentials.connect.probeIdentity:
// its credential goes in the caller-credential header. The reason and error say why it
// cannot, for the HandshakeSucceeded condition.
func (r *RemoteToolImportReconciler) withProbeIdentity(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, check *connectCheck, opts *mcpclient.Options) (string, error) {
	cc := imp.Spec.CallerCredentials
	if cc == nil || cc.Connect == nil || cc.Connect.ProbeIdentity == nil || check == nil {
		return "", nil
	}
	id := cc.Connect.ProbeIdentity
	var token string
	if ref := id.TokenSecretRef; ref != nil {
		value, err := secretValue(ctx, r.Client, imp.Namespace, *ref)
		if err != nil {
			return cantusv1alpha1.ReasonSecretNotFound, fmt.Errorf("spec.callerCredentials.connect.probeIdentity.tokenSecretRef: %w", err)
		}
		token = value
	} else {
		caller, err := r.serviceAccountCaller(ctx, imp.Namespace, id.ServiceAccount)
		if err != nil {
			return cantusv1alpha1.ReasonProbeIdentityNotConnected, err
		}
		if r.Connect.ProbeTokens == nil {
			return cantusv1alpha1.ReasonProbeIdentityNotConnected, errors.New("this operator cannot read connected accounts")
		}
		// The endpoints just checked, which the status gets after the probe.
		checked := imp.DeepCopy()
		checked.Status.CallerCredentials = &cantusv1alpha1.CallerCredentialsStatus{AuthorizationServer: check.metadata.Issuer, AuthorizationServerChecked: true,
			Client: check.client, Endpoints: &cantusv1alpha1.AuthorizationServerEndpoints{Authorization: check.metadata.AuthorizationEndpoint,
				Token: check.metadata.TokenEndpoint, Revocation: check.metadata.RevocationEndpoint, Registration: check.metadata.RegistrationEndpoint}}
		if token, err = r.Connect.ProbeTokens.AccessToken(ctx, checked, caller); err != nil {
			return cantusv1alpha1.ReasonProbeIdentityNotConnected, fmt.Errorf(
				"spec.callerCredentials.connect.probeIdentity.serviceAccount %s has no usable connected account for this import (%w): let it call a tool of the import through a gateway and connect through the link it gets",
				id.ServiceAccount, err)
		}
	}
	headers := make(map[string]string, len(opts.Headers)+1)
	for k, v := range opts.Headers {
		if !strings.EqualFold(k, cc.HeaderOrDefault()) {
			headers[k] = v
		}
	}
	headers[cc.HeaderOrDefault()] = cantusv1alpha1.DefaultCallerCredentialValuePrefix + token
	opts.Headers = headers
	return "", nil
}

// serviceAccountCaller is the caller identity of a service account, with its UID.
func (r *RemoteToolImportReconciler) serviceAccountCaller(ctx context.Context, namespace, name string) (string, error) {
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	reader := r.MetadataReader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, sa); err != nil {
		return "", fmt.Errorf("spec.callerCredentials.connect.probeIdentity.serviceAccount %s: %w", name, err)
	}
	return adapterconfig.ServiceAccountCaller(namespace+"/"+name, string(sa.UID)), nil
}

// PolicyDialer gives, for a namespace, a dialer that connects only to the addresses its
// ToolSourcePolicies allow, checked at the moment of connecting: the operator's own
// requests to authorization servers (code exchange, refresh, revocation) are held to
// the policy the import's remote is, at call time.
func PolicyDialer(reader client.Reader, resolver policy.Resolver) func(ctx context.Context, namespace string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	return func(ctx context.Context, namespace string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
		checker, err := policyCheckerFor(ctx, reader, namespace, resolver)
		if err != nil {
			return nil, err
		}
		return checker.DialContext, nil
	}
}
