// Package local is the local runtime of adapters: each SkillServer's rendered config is
// served by an adapter inside the manager process. It is its own package because it links
// the whole data plane (internal/adapter), which the rest of the control plane must not:
// only cmd/manager (and tests that run adapters in process) import it.
package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/render"
	"github.com/cantus-dev/cantus-operator/internal/workload"
)

// Runtime serves every SkillServer's rendered config inside the manager process on
// 127.0.0.1, one ephemeral port each, so that the whole product runs with nothing but an
// API server. A changed config is swapped in on the same port.
type Runtime struct {
	// Reader reads the auth Secret; the adapter pods of the kubernetes runtime get it
	// mounted instead.
	Reader client.Reader
	// Host is the address to listen on, normally 127.0.0.1.
	Host string
	// MemoryDir holds the memory tools' files, one folder per SkillServer.
	MemoryDir string

	// MintToken, when set, mints the service-account tokens the kubernetes runtime
	// projects (the connect token of a gateway, an actor token), with the TokenRequest
	// API; nil: servers that need one are refused.
	MintToken func(ctx context.Context, namespace, account, audience string, seconds int64) (string, time.Time, error)

	mu      sync.Mutex
	servers map[types.NamespacedName]*localServer
	tokens  tokens
}

var (
	_ workload.Runtime = (*Runtime)(nil)
	_ manager.Runnable = (*Runtime)(nil)
)

// New returns the local runtime.
func New(reader client.Reader) *Runtime {
	return &Runtime{Reader: reader, Host: "127.0.0.1", MemoryDir: filepath.Join(os.TempDir(), "cantus-memory"), servers: map[types.NamespacedName]*localServer{}}
}

type localServer struct {
	hash    string
	adapter *adapter.Server
	url     string
	handler atomic.Pointer[http.Handler]
	http    *http.Server
	done    chan struct{}
}

func (s *localServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.handler.Load()).ServeHTTP(w, r)
}

// OwnedTypes implements workload.Runtime: the local runtime creates no child objects.
func (l *Runtime) OwnedTypes() []client.Object { return nil }

// Apply implements workload.Runtime.
func (l *Runtime) Apply(ctx context.Context, d workload.Desired) (workload.Observation, error) {
	ss := d.SkillServer
	key := client.ObjectKeyFromObject(ss)
	files, err := l.readFiles(ctx, ss, d.Files)
	if err != nil {
		return workload.Observation{}, err
	}
	callerKeys := slices.ContainsFunc(d.Files, func(f render.File) bool { return f.AllKeys })
	hash := d.ConfigHash + "/" + digest(fmt.Sprint(withoutTokens(files, d.Files)))

	l.mu.Lock()
	defer l.mu.Unlock()
	running := l.servers[key]
	if running != nil && running.hash == hash {
		return l.observation(ss, running), nil
	}
	if len(d.ImageSkills) > 0 {
		return workload.Observation{}, fmt.Errorf("agent skills from images need the kubernetes runtime")
	}
	cfg, err := l.localConfig(key, d.Config, files, callerKeys)
	if err != nil {
		return workload.Observation{}, err
	}
	if err := l.writeLocalContent(key, cfg, d.Content, d.ContentUnread); err != nil {
		return workload.Observation{}, err
	}
	// Same server, new tools or tokens: reload in place, so that connected sessions are
	// told with notifications/tools/list_changed instead of being cut off; the adapter
	// re-reads the rewritten token file itself.
	if running != nil && running.adapter.Reload(cfg) == nil {
		running.hash = hash
		return l.observation(ss, running), nil
	}
	// The adapter outlives this reconcile: its lines (the audit among them) name the
	// server, not the reconcile that started it.
	srv, err := adapter.NewServer(cfg, adapter.WithLogger(ctrl.Log.WithName("local-adapter").WithValues("skillserver", key.String())))
	if err != nil {
		return workload.Observation{}, fmt.Errorf("build adapter for %s: %w", key, err)
	}
	handler := srv.Handler()
	if running == nil {
		running, err = l.start(ctx, key, handler, render.EndpointPath(ss))
		if err != nil {
			_ = srv.Close()
			return workload.Observation{}, err
		}
		l.servers[key] = running
	} else {
		running.handler.Store(&handler)
		if err := running.adapter.Close(); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "close the replaced local adapter")
		}
	}
	running.hash = hash
	running.adapter = srv
	return l.observation(ss, running), nil
}

// localConfig points the memory tool at a folder of this host instead of the claim, and
// the re-exported imports and auth at files of this host instead of projected volumes.
func (l *Runtime) localConfig(key types.NamespacedName, cfg *adapterconfig.Config, files map[string][]byte, callerKeys bool) (*adapterconfig.Config, error) {
	local := *cfg
	if cfg.Memory != nil {
		memory := *cfg.Memory
		memory.Root = filepath.Join(l.MemoryDir, key.Namespace, key.Name)
		local.Memory = &memory
	}
	if len(files) == 0 && !callerKeys {
		return &local, nil
	}
	dir := filepath.Join(l.MemoryDir, ".imports", key.Namespace, key.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create folder for import files: %w", err)
	}
	moved := map[string]string{}
	if callerKeys {
		onHost, err := writeCallerKeys(filepath.Join(dir, "_caller-keys"), files)
		if err != nil {
			return nil, err
		}
		moved[render.CallerKeysDir] = onHost
	}
	for path, data := range files {
		if strings.HasPrefix(path, render.CallerKeysDir+"/") {
			continue // written by writeCallerKeys
		}
		onHost := filepath.Join(dir, strings.TrimPrefix(path, render.ImportFilesDir+"/"))
		if err := os.MkdirAll(filepath.Dir(onHost), 0o700); err != nil {
			return nil, fmt.Errorf("create folder for import files: %w", err)
		}
		if err := writeFileAtomically(onHost, data); err != nil {
			return nil, err
		}
		moved[path] = onHost
	}
	if local.BearerTokenFile != "" {
		local.BearerTokenFile = moved[local.BearerTokenFile]
	}
	if local.RequestStateKeyFile != "" {
		// Rewritten by a rename when the Secret changes: the adapter reads it again.
		local.RequestStateKeyFile = moved[local.RequestStateKeyFile]
	}
	local.Auth = authOnHost(cfg.Auth, moved)
	local.Tools = make([]adapterconfig.Tool, len(cfg.Tools))
	for i, t := range cfg.Tools {
		if t.Remote != nil {
			remote := remoteOnHost(*t.Remote, moved)
			t.Remote = &remote
		}
		local.Tools[i] = t
	}
	local.Imported = importedOnHost(cfg.Imported, moved)
	return &local, nil
}

// remoteOnHost points a remote backend's header and CA files at the files written on
// this host.
func remoteOnHost(r adapterconfig.RemoteBackend, moved map[string]string) adapterconfig.RemoteBackend {
	headers := r.HeaderFiles
	r.HeaderFiles = nil
	for h, p := range headers {
		if r.HeaderFiles == nil {
			r.HeaderFiles = map[string]string{}
		}
		r.HeaderFiles[h] = moved[p]
	}
	if r.CAFile != "" {
		r.CAFile = moved[r.CAFile]
	}
	r.CallerCredentials = callerCredentialsOnHost(r.CallerCredentials, moved)
	return r
}

// callerCredentialsOnHost points the caller-keys folder and the client credential's
// files at those written on this host; the rendered config is shared, so it is copied.
func callerCredentialsOnHost(in *adapterconfig.CallerCredentials, moved map[string]string) *adapterconfig.CallerCredentials {
	if in == nil {
		return nil
	}
	out := *in
	if p := in.PerCallerSecret; p != nil {
		onHost := *p
		onHost.Dir = moved[p.Dir]
		out.PerCallerSecret = &onHost
	}
	if c := in.Connect; c != nil {
		onHost := *c
		onHost.TokenFile = moved[c.TokenFile]
		if dir, ok := moved[render.CallerKeysDir]; ok && c.CAFile != "" {
			onHost.CAFile = filepath.Join(dir, filepath.Base(c.CAFile))
		}
		out.Connect = &onHost
	}
	if x := in.TokenExchange; x != nil {
		onHost := *x
		onHost.ClientSecretFile = moved[x.ClientSecretFile]
		onHost.PrivateKeyFile = moved[x.PrivateKeyFile]
		onHost.ActorTokenFile = moved[x.ActorTokenFile]
		out.TokenExchange = &onHost
	}
	return &out
}

// writeCallerKeys makes dir hold exactly the caller keys among files (those under
// render.CallerKeysDir), as the kubelet keeps a Secret volume: new and changed keys
// written atomically, removed ones deleted.
func writeCallerKeys(dir string, files map[string][]byte) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create folder for caller keys: %w", err)
	}
	keep := map[string]bool{}
	for path, data := range files {
		name, ok := strings.CutPrefix(path, render.CallerKeysDir+"/")
		if !ok {
			continue
		}
		keep[name] = true
		if err := writeFileAtomically(filepath.Join(dir, name), data); err != nil {
			return "", err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read folder of caller keys: %w", err)
	}
	for _, e := range entries {
		if !keep[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("remove a caller key: %w", err)
			}
		}
	}
	return dir, nil
}

// importedOnHost is the imported prompts, resources, templates and skills with their
// remotes' files on this host, like the imported tools'.
func importedOnHost(imported *adapterconfig.ImportedContent, moved map[string]string) *adapterconfig.ImportedContent {
	if imported == nil {
		return nil
	}
	onHost := func(items []adapterconfig.ImportedItem) []adapterconfig.ImportedItem {
		out := slices.Clone(items)
		for i := range out {
			out[i].Remote = remoteOnHost(out[i].Remote, moved)
		}
		return out
	}
	return &adapterconfig.ImportedContent{
		Prompts:           onHost(imported.Prompts),
		Resources:         onHost(imported.Resources),
		ResourceTemplates: onHost(imported.ResourceTemplates),
		Skills:            onHost(imported.Skills),
	}
}

// writeFileAtomically replaces path in one rename, as the kubelet swaps a projected
// volume, so that an adapter re-reading a rotated token never sees half a file.
func writeFileAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// authOnHost points the issuers' CA bundles at the files written on this host.
func authOnHost(auth *adapterconfig.AuthConfig, moved map[string]string) *adapterconfig.AuthConfig {
	if auth == nil {
		return nil
	}
	local := *auth
	local.Issuers = slices.Clone(auth.Issuers)
	for i, issuer := range local.Issuers {
		if onHost, ok := moved[issuer.CAFile]; ok {
			local.Issuers[i].CAFile = onHost
		}
	}
	return &local
}

// readFiles reads the Secret and ConfigMap keys the kubernetes runtime would project.
func (l *Runtime) readFiles(ctx context.Context, ss *cantusv1alpha1.SkillServer, files []render.File) (map[string][]byte, error) {
	namespace := ss.Namespace
	out := map[string][]byte{}
	for _, f := range files {
		if f.ServiceAccountTokenAudience != "" {
			if l.MintToken == nil {
				return nil, errors.New("a service-account token file (an actor token, or a gateway's connect token) needs the kubernetes runtime, which projects the pod's service-account token, or a local runtime that mints tokens")
			}
			token, err := l.token(ctx, client.ObjectKeyFromObject(ss), serviceAccountOf(ss), f)
			if err != nil {
				return nil, err
			}
			out[f.Path] = token
			continue
		}
		if f.AllKeys {
			if err := l.readAllKeys(ctx, namespace, f, out); err != nil {
				return nil, err
			}
			continue
		}
		var data map[string][]byte
		if f.Secret != "" {
			s := &corev1.Secret{}
			if err := l.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: f.Secret}, s); err != nil {
				return nil, fmt.Errorf("read Secret %s: %w", f.Secret, err)
			}
			data = s.Data
		} else {
			cm := &corev1.ConfigMap{}
			if err := l.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: f.ConfigMap}, cm); err != nil {
				return nil, fmt.Errorf("read ConfigMap %s: %w", f.ConfigMap, err)
			}
			data = map[string][]byte{}
			for k, v := range cm.Data {
				data[k] = []byte(v)
			}
		}
		value, ok := data[f.Key]
		if !ok {
			return nil, fmt.Errorf("%s%s has no key %q", f.Secret, f.ConfigMap, f.Key)
		}
		out[f.Path] = value
	}
	return out, nil
}

// readAllKeys adds every key of the Secret of f, as files in the folder f.Path.
func (l *Runtime) readAllKeys(ctx context.Context, namespace string, f render.File, out map[string][]byte) error {
	s := &corev1.Secret{}
	if err := l.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: f.Secret}, s); err != nil {
		return fmt.Errorf("read Secret %s: %w", f.Secret, err)
	}
	for k, v := range s.Data {
		out[f.Path+"/"+k] = v
	}
	return nil
}

func (l *Runtime) start(ctx context.Context, key types.NamespacedName, handler http.Handler, endpoint string) (*localServer, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(l.Host, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen for %s: %w", key, err)
	}
	s := &localServer{
		url:  fmt.Sprintf("http://%s%s", ln.Addr().String(), endpoint),
		done: make(chan struct{}),
	}
	s.handler.Store(&handler)
	s.http = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	log := ctrl.LoggerFrom(ctx).WithValues("url", s.url)
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(err, "local adapter stopped")
		}
	}()
	log.Info("local adapter listening")
	return s, nil
}

func (l *Runtime) observation(ss *cantusv1alpha1.SkillServer, s *localServer) workload.Observation {
	return workload.Observation{
		URL:           s.url,
		ProbeURL:      s.url,
		Selector:      workload.Selector(ss),
		Replicas:      1,
		ReadyReplicas: 1,
		Available:     true,
		Reason:        cantusv1alpha1.ReasonAvailable,
		Message:       "served in the manager process (local runtime)",
	}
}

// Forget implements workload.Runtime: it stops the SkillServer's local adapter.
func (l *Runtime) Forget(ctx context.Context, key types.NamespacedName) error {
	l.mu.Lock()
	s := l.servers[key]
	delete(l.servers, key)
	l.mu.Unlock()
	if s == nil {
		return nil
	}
	return shutdownLocal(ctx, s)
}

// Stop shuts every local adapter down; the manager calls it on exit.
func (l *Runtime) Stop(ctx context.Context) error {
	l.mu.Lock()
	servers := l.servers
	l.servers = map[types.NamespacedName]*localServer{}
	l.mu.Unlock()
	var errs []error
	for _, s := range servers {
		errs = append(errs, shutdownLocal(ctx, s))
	}
	return errors.Join(errs...)
}

// Start implements manager.Runnable so that the manager stops the adapters on exit; it
// renews the tokens it minted meanwhile.
func (l *Runtime) Start(ctx context.Context) error {
	if l.MintToken != nil {
		go l.renewTokens(ctx)
	}
	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.Stop(shutdownCtx)
}

func shutdownLocal(ctx context.Context, s *localServer) error {
	if err := s.http.Shutdown(ctx); err != nil {
		return fmt.Errorf("stop local adapter %s: %w", s.url, err)
	}
	<-s.done
	return s.adapter.Close()
}

// withoutTokens leaves out the minted tokens, which change without the config changing:
// their files are rewritten in place.
func withoutTokens(values map[string][]byte, files []render.File) map[string][]byte {
	out := make(map[string][]byte, len(values))
	for k, v := range values {
		out[k] = v
	}
	for _, f := range files {
		if f.ServiceAccountTokenAudience != "" {
			delete(out, f.Path)
		}
	}
	return out
}

// digest lets the local runtime notice changed files without keeping their values.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
