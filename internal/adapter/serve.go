package adapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/cantus-dev/cantus-operator/internal/adapter/admission"
)

// sseAnswerSettle is how long shutdown waits, after the last call returned, before
// closing sse streams: on that transport the answer is queued for the stream after the
// handler returns, and closing the stream at once could drop it.
const sseAnswerSettle = 200 * time.Millisecond

// Serve serves on ln until ctx is cancelled, then shuts down gracefully: readiness
// fails first, new calls are still taken for the drain delay, then refused while the
// calls in flight finish, all within the shutdown grace. It returns nil after a clean
// shutdown. A Server serves once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !s.serving.CompareAndSwap(false, true) {
		return errors.New("adapter server is already serving: a Server serves once")
	}
	srv := &http.Server{
		Handler:           s.drain.closing(s.handler),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		// Calls must outlive ctx: its cancellation starts a graceful shutdown, it does
		// not abort what is in flight.
		BaseContext: func(net.Listener) context.Context { return context.Background() },
		ErrorLog:    slog.NewLogLogger(logr.ToSlogHandler(s.log.WithName("http")), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.log.Info("serving", "address", ln.Addr().String(), "transport", s.cfg.Transport,
		"stateless", s.cfg.Stateless, "tools", len(s.state.Load().tools))

	select {
	case err := <-served:
		s.endStreams()
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	return s.shutdown(srv, served)
}

func (s *Server) shutdown(srv *http.Server, served <-chan error) error {
	began := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), began.Add(s.opts.shutdownGrace))
	defer cancel()

	// From now on every response says Connection: close (closingWhenShuttingDown), so
	// clients reconnect through the Service and reach a ready replica.
	s.drain.begin()
	s.log.Info("shutdown began, readiness failing", "drainDelay", s.opts.drainDelay.String(),
		"shutdownGrace", s.opts.shutdownGrace.String(), "inFlight", s.gate.InFlight())

	sleep(ctx, s.opts.drainDelay)
	s.gate.RefuseNew()
	s.log.Info("refusing new calls, waiting for calls in flight", "inFlight", s.gate.InFlight())

	waitErr := waitCallsAnswered(ctx, s.gate, s.sse != nil)
	stranded := s.gate.InFlight()
	s.endStreams()
	if s.sse != nil {
		s.sse.CloseSessions()
	}
	if err := srv.Shutdown(ctx); err != nil {
		s.log.Info("closing connections that did not finish within the shutdown grace", "reason", err.Error())
		_ = srv.Close()
	}
	// After Shutdown or Close, Serve returns ErrServerClosed: anything else is news.
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		s.log.Error(err, "serving ended unexpectedly during shutdown")
	}
	s.backend.CloseIdleConnections()
	s.subscriptions.Close()
	s.remotes.CloseAll()
	s.state.Load().search.close() // the calls are done: no search runs any more

	if waitErr != nil {
		return fmt.Errorf("shutdown grace %s expired with %d calls in flight: %w", s.opts.shutdownGrace, stranded, waitErr)
	}
	s.log.Info("shutdown complete", "took", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// drain is whether shutdown has begun, as readiness and connections show it.
type drain struct{ shuttingDown atomic.Bool }

func (d *drain) begin() { d.shuttingDown.Store(true) }

// serveReadyz fails as soon as shutdown begins, so endpoints stop routing here while
// in-flight calls finish.
func (d *drain) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if d.shuttingDown.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shutting down"))
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// closing closes each connection after its next answer once shutdown began. Not
// SetKeepAlivesEnabled(false): that also closes the idle connections at once, and a
// client sending on one just then gets "server closed idle connection" for a POST,
// which it cannot retry. Idle connections are closed by Shutdown, after the drain delay.
func (d *drain) closing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.shuttingDown.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// waitCallsAnswered returns when gate holds no call and, on the sse transport (sse),
// the answers had time to reach their streams.
func waitCallsAnswered(ctx context.Context, gate *admission.Gate, sse bool) error {
	for {
		if err := gate.WaitIdle(ctx); err != nil {
			return err
		}
		if !sse {
			return nil
		}
		// An sse call starts after its POST was answered, so one admitted just before
		// refusing may only now be starting: settle, then look again.
		sleep(ctx, sseAnswerSettle)
		if gate.InFlight() == 0 {
			return nil
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
