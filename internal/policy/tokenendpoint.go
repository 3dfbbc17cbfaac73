package policy

import (
	"context"
	"fmt"
	"net/url"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
)

// CheckTokenEndpoint decides on an OAuth token endpoint (RemoteToolImport
// spec.callerCredentials.tokenExchange.tokenEndpoint) as CheckURL decides on a remote,
// and also requires https unless every address the host resolves to is loopback: the
// endpoint receives the callers' own tokens and the gateway's client credential, which
// must not cross a network in clear.
func (c *Checker) CheckTokenEndpoint(ctx context.Context, rawURL string) Decision {
	d := c.CheckURL(ctx, rawURL)
	if !d.Allowed {
		return d
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return Decision{Reason: cantusv1alpha1.ReasonInvalidSource, Message: fmt.Sprintf("%q is not an http(s) URL with a host", rawURL)}
	}
	if u.Scheme == "https" {
		return d
	}
	if len(d.Addresses) == 0 {
		return Decision{Reason: cantusv1alpha1.ReasonInsecureTokenEndpoint, Message: fmt.Sprintf(
			"token endpoint %s is plain http and its addresses are unknown: only loopback may be reached over http; use https", u.Redacted())}
	}
	for _, a := range d.Addresses {
		if !a.IsLoopback() {
			return Decision{Reason: cantusv1alpha1.ReasonInsecureTokenEndpoint, Message: fmt.Sprintf(
				"token endpoint %s is plain http and %s resolves to %s, which is not loopback: callers' tokens and the client credential would cross the network in clear; use https",
				u.Redacted(), u.Hostname(), a)}
		}
	}
	return d
}
