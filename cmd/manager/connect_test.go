package main

import (
	"slices"
	"testing"
)

// Gateways reach the connect token endpoint at the catalog Service (kubernetes
// runtime), on loopback (local runtime), or where --connect-endpoint says; the
// self-signed certificate names the Service.
func TestCallerCredentials_ConnectEndpointAsGatewaysReachIt(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "ops")
	for _, tc := range []struct {
		opts options
		want string
	}{
		{options{runtime: "kubernetes", connect: connectOptions{catalogService: "cantus-catalog:443"}}, "https://cantus-catalog.ops.svc/connect/v1/token"},
		{options{runtime: "kubernetes", connect: connectOptions{catalogService: "catalog:8444"}}, "https://catalog.ops.svc:8444/connect/v1/token"},
		{options{runtime: "local", catalogAddr: ":9443"}, "https://127.0.0.1:9443/connect/v1/token"},
		{options{runtime: "kubernetes", connect: connectOptions{endpoint: "https://cantus.internal/connect/v1/token"}}, "https://cantus.internal/connect/v1/token"},
	} {
		if got := connectEndpoint(tc.opts); got != tc.want {
			t.Errorf("%+v: endpoint %s, want %s", tc.opts, got, tc.want)
		}
	}
	hosts := catalogHosts(options{clusterDomain: "cluster.local", connect: connectOptions{catalogService: "cantus-catalog:443"}})
	if !slices.Contains(hosts, "cantus-catalog.ops.svc") || !slices.Contains(hosts, "cantus-catalog.ops.svc.cluster.local") {
		t.Errorf("self-signed hosts %v", hosts)
	}
}
