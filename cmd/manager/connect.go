package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/catalog"
	"github.com/cantus-dev/cantus-operator/internal/connect"
	"github.com/cantus-dev/cantus-operator/internal/controller"
)

// connectOptions are the flags of connect mode (RemoteToolImport
// spec.callerCredentials.connect).
type connectOptions struct {
	// baseURL is the operator's public HTTPS base URL (--connect-base-url).
	baseURL string
	// keySecret is the key ring's Secret (--connect-key-secret).
	keySecret string
	// namespace keeps the accounts (--connect-namespace).
	namespace string
	// endpoint is the token endpoint as gateways reach it (--connect-endpoint).
	endpoint string
	// catalogService is the catalog's Service as "name:port" (--catalog-service).
	catalogService string
}

func bindConnectFlags(o *connectOptions) {
	ns := envOr("POD_NAMESPACE", "cantus-system")
	flagString(&o.baseURL, "connect-base-url", "", "public HTTPS base URL of the operator's catalog listener, where users' browsers open connect links and the OAuth callback, and where the operator's Client ID Metadata Document is served; empty: links use the host gateways reach the operator at, and imports in connect mode need a pre-registered client")
	flagString(&o.keySecret, "connect-key-secret", ns+"/cantus-connect-keys", "namespace/name of the Secret holding the keys that encrypt connected accounts (key id -> 32 bytes, raw or base64; the last id in byte order encrypts)")
	flagString(&o.namespace, "connect-namespace", ns, "namespace that keeps the connected accounts, encrypted")
	flagString(&o.endpoint, "connect-endpoint", "", "URL at which gateways reach the operator's connect token endpoint; empty: the catalog's Service (kubernetes runtime) or 127.0.0.1 (local runtime)")
	flagString(&o.catalogService, "catalog-service", "cantus-catalog:443", "the catalog's Service, name:port, through which gateways reach the connect token endpoint")
}

// setUpConnect serves the connect endpoints beside the catalog's, and tells the
// controllers where gateways reach them and which CA they trust there.
func setUpConnect(mgr ctrl.Manager, opts options, direct client.Client, cat *catalog.Catalog, catalogHandler http.Handler, listener *catalog.Runnable,
	servers *controller.SkillServerReconciler, imports *controller.RemoteToolImportReconciler, callers connect.Authenticator) (http.Handler, error) {
	o := opts.connect
	keyNS, keyName, ok := strings.Cut(o.keySecret, "/")
	if !ok || keyNS == "" || keyName == "" {
		return nil, fmt.Errorf("--connect-key-secret: want namespace/name, got %q", o.keySecret)
	}
	if o.baseURL != "" {
		if u, err := url.Parse(o.baseURL); err != nil || u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("--connect-base-url: want an https:// URL, got %q", o.baseURL)
		}
	}
	keys := &connect.Keys{Reader: direct, Secret: types.NamespacedName{Namespace: keyNS, Name: keyName}}
	store := &connect.Store{Client: direct, Namespace: o.namespace, Keys: keys}
	handler := &connect.Handler{
		Client: mgr.GetClient(), Store: store, BaseURL: o.baseURL, Callers: callers,
		Gateways: &catalog.Authorizer{Client: direct, Audience: adapterconfig.ConnectAudience},
		Log:      ctrl.Log.WithName("connect"),
		// Held to the import's namespace's ToolSourcePolicies when dialling.
		DialFor: controller.PolicyDialer(mgr.GetClient(), nil),
	}
	if err := mgr.Add(&connect.Sweeper{Store: store, Reader: mgr.GetClient(), Log: ctrl.Log.WithName("connect")}); err != nil {
		return nil, fmt.Errorf("add the connect sweeper: %w", err)
	}
	imports.Connect = &controller.ConnectSettings{BaseURL: o.baseURL, Counter: &connect.Counter{Reader: direct, Namespace: o.namespace, Keys: keys}, ProbeTokens: handler}
	servers.ConnectEndpoint = connectEndpoint(opts)
	servers.ConnectCA = listener.CA
	cat.Accounts = connect.States{Store: store}
	mux := http.NewServeMux()
	handler.Routes(mux)
	mux.Handle("/", catalogHandler)
	return mux, nil
}

// connectEndpoint is where gateways reach the token endpoint: the catalog's Service in
// the operator's namespace, or, for adapters in this process, the listener on loopback.
func connectEndpoint(opts options) string {
	if opts.connect.endpoint != "" {
		return opts.connect.endpoint
	}
	if opts.runtime == "local" {
		_, port, _ := net.SplitHostPort(opts.catalogAddr)
		return "https://127.0.0.1:" + port + adapterconfig.ConnectTokenPath
	}
	name, port, _ := strings.Cut(opts.connect.catalogService, ":")
	host := name + "." + envOr("POD_NAMESPACE", "cantus-system") + ".svc"
	if port != "" && port != "443" {
		host += ":" + port
	}
	return "https://" + host + adapterconfig.ConnectTokenPath
}

// catalogHosts are the names the self-signed certificate must be valid for: the
// Service's, as gateways reach it.
func catalogHosts(opts options) []string {
	name, _, _ := strings.Cut(opts.connect.catalogService, ":")
	ns := envOr("POD_NAMESPACE", "cantus-system")
	return []string{name + "." + ns + ".svc", name + "." + ns + ".svc." + opts.clusterDomain}
}

func flagString(p *string, name, value, usage string) {
	flag.StringVar(p, name, value, usage)
}
