package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// The gateway comparison: the skill re-exported through a gateway (a second adapter
// whose tool has a Remote backend, as a SkillServer with spec.imports renders it)
// against a direct call to the same remote.

// The skill as the gateway re-exports it.
const (
	// gatewayToolName is its name on the gateway (an import prefix).
	gatewayToolName = "remote_greet_reader"
	// gatewayImport names the RemoteToolImport it comes from ("namespace/name").
	gatewayImport = "bench/remote"
)

// gatewayTargets bound gateway/direct, from issue 4 ("Tests and figures").
var gatewayTargets = targets{minThroughput: 0.6, maxP50: 1.5}

// gatewayComparisons measures the skill re-exported through a gateway against a direct
// call to its remote and, with -hop, a bare reverse proxy against the direct call.
func gatewayComparisons(o options, token string, newTarget func(name, url, tool string) target) (_ []comparison, _ func(), err error) {
	remoteURL, gatewayURL, started, err := startRemoteAndGateway(token,
		func() (string, func(), error) { return startRemote(o.remoteDelay, token) }, startGateway)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		if err != nil {
			started.run()
		}
	}()
	comparisons := []comparison{{
		name: onlyGateway,
		title: fmt.Sprintf("gateway/direct: tools/call %s on the gateway, re-exported from the remote's %s, against %s called on the remote directly%s",
			gatewayToolName, toolName, toolName, remoteKind(o.remoteDelay)),
		a:       newTarget(nameGateway, gatewayURL, gatewayToolName),
		b:       newTarget(nameDirect, remoteURL, toolName),
		targets: gatewayTargets,
	}}
	if o.hop {
		c, stopHop, err := hopComparison(remoteURL, newTarget)
		if err != nil {
			return nil, nil, err
		}
		started = append(started, stopHop)
		comparisons = append(comparisons, c)
	}
	return comparisons, started.run, nil
}

// startRemoteAndGateway starts a remote with startRemote and a gateway in front of it
// with startGateway (given the remote's URL, the file of the header it sends the remote,
// and the token it requires), and returns their URLs and their stops.
func startRemoteAndGateway(token string, startRemote func() (string, func(), error),
	startGateway func(remoteURL, headerFile, token string) (string, func(), error)) (remoteURL, gatewayURL string, started stops, err error) {
	defer func() {
		if err != nil {
			started.run()
		}
	}()
	remoteURL, stopRemote, err := startRemote()
	if err != nil {
		return "", "", nil, err
	}
	started = append(started, stopRemote)
	headerFile, stopHeaderFile, err := remoteHeaderFile(token)
	if err != nil {
		return "", "", started, err
	}
	started = append(started, stopHeaderFile)
	gatewayURL, stopGateway, err := startGateway(remoteURL, headerFile, token)
	if err != nil {
		return "", "", started, err
	}
	return remoteURL, gatewayURL, append(started, stopGateway), nil
}

// startRemote serves the remote the gateway re-exports from: the template skill, or with
// delay an HTTP-backed tool of the same name whose backend answers after delay.
func startRemote(delay time.Duration, token string) (string, func(), error) {
	if delay <= 0 {
		return startTemplateAdapter(nameRemote, token)
	}
	backendURL, stopBackend, err := serveLabelled(nameBackend, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, wantText)
	}))
	if err != nil {
		return "", nil, err
	}
	url, stop, err := startAdapter(nameRemote, token, adapterconfig.Tool{
		Name:        toolName,
		Description: toolDesc,
		InputSchema: json.RawMessage(toolSchema),
		HTTP:        &adapterconfig.HTTPBackend{URL: backendURL, Timeout: adapterconfig.Duration{Duration: callTimeout}, MaxResponseBytes: 1 << 20},
	})
	if err != nil {
		stopBackend()
		return "", nil, err
	}
	return url, func() { stop(); stopBackend() }, nil
}

func remoteKind(delay time.Duration) string {
	if delay <= 0 {
		return " (a template: no work of its own)"
	}
	return fmt.Sprintf(" (an HTTP backend that takes %s)", delay)
}

// startGateway serves the skill of the remote at remoteURL re-exported, as the
// controller renders a SkillServer whose spec.imports names a RemoteToolImport: a tool
// with a Remote backend (streamable HTTP, the remote's schema, a prefixed name), on an
// adapter that keeps one pooled client session to the remote. headerFile, when set,
// holds the Authorization header the gateway sends to the remote; token, when set, is
// the bearer token the gateway itself requires.
func startGateway(remoteURL, headerFile, token string) (string, func(), error) {
	remote := remoteBackend(remoteURL, headerFile, toolName)
	return startAdapter(nameGateway, token, adapterconfig.Tool{
		Name:        gatewayToolName,
		Description: toolDesc,
		InputSchema: json.RawMessage(toolSchema),
		Remote:      &remote,
	})
}

// remoteBackend reaches remoteName (a tool or prompt; "" for a resource) at the remote
// at remoteURL, over streamable HTTP, with the header in headerFile when it is set.
func remoteBackend(remoteURL, headerFile, remoteName string) adapterconfig.RemoteBackend {
	b := adapterconfig.RemoteBackend{
		Import:     gatewayImport,
		URL:        remoteURL,
		Transport:  adapterconfig.TransportStreamableHTTP,
		RemoteName: remoteName,
		Timeout:    adapterconfig.Duration{Duration: callTimeout},
	}
	if headerFile != "" {
		b.HeaderFiles = map[string]string{"Authorization": headerFile}
	}
	return b
}

// remoteHeaderFile is the file of the Authorization header a gateway sends its remote
// when the remote requires token, as a Secret mounted for a RemoteToolImport's headers
// ("" without a token), and what removes it.
func remoteHeaderFile(token string) (string, func(), error) {
	if token == "" {
		return "", func() {}, nil
	}
	path, err := writeHeaderFile("Bearer " + token)
	if err != nil {
		return "", nil, err
	}
	return path, func() { _ = os.Remove(path) }, nil
}

// writeHeaderFile writes value to a new private temporary file and returns its path.
func writeHeaderFile(value string) (string, error) {
	f, err := os.CreateTemp("", "cantus-bench-authorization-*")
	if err != nil {
		return "", fmt.Errorf("header file: %w", err)
	}
	if _, err := f.WriteString(value); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("header file: %w", err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("header file: %w", err)
	}
	return f.Name(), nil
}
