package workload

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/stdioproxy"
)

// LocalBridges is the local runtime of stdio bridges: each stdio RemoteToolImport gets a
// bridge process on this host,
//
//	ADAPTER bridge --host 127.0.0.1 --port 0 -- COMMAND... ARGS...
//
// whose URL is http://127.0.0.1:PORT/mcp (PORT from its "listening on" line). The
// import's spec.stdio.image is NOT used here: the command runs directly on this host, so
// it must be installed here (node, npx, uvx, …); only the kubernetes runtime runs the
// image. The bridge gets a small environment (PATH, HOME, locale, proxies; see
// localEnvNames), not the operator's, so the command sees none of the operator's
// credentials. The bridge's token reaches it as CANTUS_BRIDGE_TOKEN, which it keeps from
// the command. A changed command, args or token restarts the bridge (on a new port); a
// bridge that died is started again by the next Ensure.
//
// LocalBridges is a controller-runtime manager.Runnable: Start blocks until the manager stops
// and then stops every bridge.
type LocalBridges struct {
	adapterBinary string
	log           logr.Logger

	// Host is the address bridges listen on.
	Host string
	// StartTimeout bounds the wait for a bridge's listening line.
	StartTimeout time.Duration
	// ReadyWait is how long Ensure waits for /readyz of a bridge it just started before
	// it reports not ready (the controller asks again later).
	ReadyWait time.Duration
	// StopTimeout is how long a bridge has after SIGTERM (it stops its own child in
	// that time) before it is killed.
	StopTimeout time.Duration

	http *http.Client

	mu      sync.Mutex
	stopped bool
	bridges map[types.NamespacedName]*localEntry
}

// localEntry serializes the work on one import's bridge.
type localEntry struct {
	mu   sync.Mutex
	proc *localProcess
}

// localProcess is one running bridge process.
type localProcess struct {
	key     types.NamespacedName
	hash    string
	cmd     *exec.Cmd
	baseURL string
	done    chan struct{} // closed when the process exited
	stderr  *stdioproxy.TailBuffer
}

func (p *localProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// NewLocalBridges returns the local runtime of stdio bridges; adapterBinary is the adapter executable (normally
// the operator's sibling, e.g. bin/adapter).
func NewLocalBridges(adapterBinary string, logger logr.Logger) *LocalBridges {
	return &LocalBridges{
		adapterBinary: adapterBinary,
		log:           logger,
		Host:          "127.0.0.1",
		StartTimeout:  10 * time.Second,
		ReadyWait:     2 * time.Second,
		StopTimeout:   15 * time.Second,
		http:          &http.Client{Timeout: 2 * time.Second},
		bridges:       map[types.NamespacedName]*localEntry{},
	}
}

// OwnedTypes is empty: the local runtime creates no Kubernetes objects.
func (l *LocalBridges) OwnedTypes() []client.Object { return nil }

// Ensure starts the import's bridge, or restarts it when its command, args or token
// changed or it died, and returns its URL; ready is true once its /readyz answers 200
// (the stdio server runs). Every process on this host can reach 127.0.0.1, so the token
// is what keeps the bridge to its callers; access.SkillServers is not needed here.
func (l *LocalBridges) Ensure(ctx context.Context, imp *cantusv1alpha1.RemoteToolImport, access BridgeAccess) (string, bool, error) {
	argv, err := BridgeArgv(imp)
	if err != nil {
		return "", false, err
	}
	if access.Token == "" {
		return "", false, fmt.Errorf("the bridge of %s/%s has no token", imp.Namespace, imp.Name)
	}
	key := types.NamespacedName{Namespace: imp.Namespace, Name: imp.Name}
	hash := argvHash(append([]string{tokenDigest(access.Token)}, argv...))

	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return "", false, errors.New("the local bridge runtime is stopped")
	}
	e := l.bridges[key]
	if e == nil {
		e = &localEntry{}
		l.bridges[key] = e
	}
	l.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if p := e.proc; p != nil {
		switch {
		case p.exited():
			l.log.Info("stdio bridge exited; starting it again", "remoteToolImport", key.String(),
				"status", p.cmd.ProcessState.String(), "stderr", p.stderr.String())
			e.proc = nil
		case p.hash != hash:
			l.log.Info("stdio command changed; restarting its bridge", "remoteToolImport", key.String())
			l.stopProcess(ctx, p)
			e.proc = nil
		default:
			return p.baseURL + stdioproxy.PathMCP, l.ready(ctx, p), nil
		}
	}
	p, err := l.start(ctx, key, argv, hash, access.Token)
	if err != nil {
		return "", false, err
	}
	l.mu.Lock()
	current := !l.stopped && l.bridges[key] == e
	l.mu.Unlock()
	if !current { // Stop or Forget ran meanwhile
		l.stopProcess(ctx, p)
		return "", false, fmt.Errorf("the bridge of %s was stopped while it started", key)
	}
	e.proc = p
	return p.baseURL + stdioproxy.PathMCP, l.waitReady(ctx, p), nil
}

// Forget stops the import's bridge.
func (l *LocalBridges) Forget(ctx context.Context, key types.NamespacedName) error {
	l.mu.Lock()
	e := l.bridges[key]
	delete(l.bridges, key)
	l.mu.Unlock()
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proc != nil {
		l.stopProcess(ctx, e.proc)
		e.proc = nil
	}
	return nil
}

// Start implements manager.Runnable: it blocks until ctx ends, then stops every bridge.
func (l *LocalBridges) Start(ctx context.Context) error {
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), l.StopTimeout+5*time.Second)
	defer cancel()
	return l.Stop(stopCtx)
}

// Stop stops every bridge (in parallel) and refuses new ones.
func (l *LocalBridges) Stop(ctx context.Context) error {
	l.mu.Lock()
	l.stopped = true
	entries := l.bridges
	l.bridges = map[types.NamespacedName]*localEntry{}
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.proc != nil {
				l.stopProcess(ctx, e.proc)
				e.proc = nil
			}
		}()
	}
	wg.Wait()
	return nil
}

// localEnvNames are the variables of the operator's environment a local bridge (and so
// the stdio command) gets; everything else, credentials included, stays behind.
var localEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "TZ",
	"LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS",
}

func localEnv() []string {
	env := []string{}
	for _, name := range localEnvNames {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

func (l *LocalBridges) start(ctx context.Context, key types.NamespacedName, argv []string, hash, token string) (*localProcess, error) {
	args := append([]string{"bridge", "--host", l.Host, "--port", "0", "--"}, argv...)
	cmd := exec.Command(l.adapterBinary, args...)
	cmd.Env = append(localEnv(), stdioproxy.TokenEnv+"="+token)
	cmd.SysProcAttr = bridgeSysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p := &localProcess{key: key, hash: hash, cmd: cmd, done: make(chan struct{}), stderr: stdioproxy.NewTailBuffer(4 << 10)}
	log := l.log.WithValues("remoteToolImport", key.String())
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the stdio bridge %s: %w", l.adapterBinary, err)
	}
	urls := make(chan string, 1)
	var output sync.WaitGroup
	output.Add(2)
	go func() {
		defer output.Done()
		stdioproxy.LogLines(stderr, log, "bridge", p.stderr)
	}()
	go func() {
		defer output.Done()
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if u := parseListening(sc.Text()); u != "" && !found {
				found = true
				urls <- u
				continue
			}
			log.V(1).Info("bridge stdout", "line", sc.Text())
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		output.Wait() // Wait closes the pipes: read them to the end first
		_ = cmd.Wait()
		close(p.done)
	}()

	timer := time.NewTimer(l.StartTimeout)
	defer timer.Stop()
	select {
	case u := <-urls:
		p.baseURL = u
		log.Info("stdio bridge listening", "url", u+stdioproxy.PathMCP, "pid", cmd.Process.Pid, "command", argv[0])
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("the stdio bridge exited before it was listening (%s): %s",
			cmd.ProcessState.String(), strings.TrimSpace(p.stderr.String()))
	case <-timer.C:
		l.stopProcess(ctx, p)
		return nil, fmt.Errorf("the stdio bridge was not listening within %s: %s", l.StartTimeout, strings.TrimSpace(p.stderr.String()))
	case <-ctx.Done():
		l.stopProcess(context.Background(), p)
		return nil, fmt.Errorf("starting the stdio bridge: %w", ctx.Err())
	}
}

// parseListening returns http://HOST:PORT from "listening on http://HOST:PORT".
func parseListening(line string) string {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if !ok {
		return ""
	}
	u, err := url.Parse(strings.TrimSpace(rest))
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" || u.Port() == "0" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// ready asks the bridge's /readyz once.
func (l *LocalBridges) ready(ctx context.Context, p *localProcess) bool {
	if p.exited() {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.baseURL+stdioproxy.PathReadyz, nil)
	if err != nil {
		return false
	}
	resp, err := l.http.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitReady polls /readyz for up to ReadyWait.
func (l *LocalBridges) waitReady(ctx context.Context, p *localProcess) bool {
	deadline := time.Now().Add(l.ReadyWait)
	for {
		if l.ready(ctx, p) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil || p.exited() {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopProcess sends SIGTERM (the bridge then stops its child) and waits; it kills the
// bridge after StopTimeout or when ctx ends. The child has a death signal set, so it does
// not outlive a killed bridge.
func (l *LocalBridges) stopProcess(ctx context.Context, p *localProcess) {
	if p.exited() {
		return
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil { // no SIGTERM on this system
		_ = p.cmd.Process.Kill()
	}
	timer := time.NewTimer(l.StopTimeout)
	defer timer.Stop()
	select {
	case <-p.done:
		return
	case <-timer.C:
	case <-ctx.Done():
	}
	l.log.Info("stdio bridge did not stop in time; killing it", "remoteToolImport", p.key.String())
	_ = p.cmd.Process.Kill()
	<-p.done
}

// BridgeArgv is the command line of an import's stdio server: command then args.
func BridgeArgv(imp *cantusv1alpha1.RemoteToolImport) ([]string, error) {
	if imp.Spec.Stdio == nil || len(imp.Spec.Stdio.Command) == 0 || imp.Spec.Stdio.Command[0] == "" {
		return nil, fmt.Errorf("RemoteToolImport %s/%s has no stdio command", imp.Namespace, imp.Name)
	}
	argv := append([]string(nil), imp.Spec.Stdio.Command...)
	return append(argv, imp.Spec.Stdio.Args...), nil
}

func argvHash(argv []string) string {
	h := sha256.New()
	for _, a := range argv {
		_, _ = fmt.Fprintf(h, "%d:%s\x00", len(a), a)
	}
	return hex.EncodeToString(h.Sum(nil))
}
