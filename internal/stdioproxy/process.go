package stdioproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// The child's lifecycle:
//
//   - it is started with list-form exec (exec.Command(argv[0], argv[1:]...)), never through a
//     shell, in a process group of its own so that stopping it reaches what it started;
//   - stdin and stdout carry newline-delimited JSON-RPC (the MCP stdio transport); one
//     writer goroutine writes whole lines from a queue, so a child that stops reading its
//     input makes callers time out instead of interleaving half-written lines;
//   - stderr goes to the logger line by line, lines cut at StderrLineBytes and at most
//     StderrLinesPerSecond lines a second; the lines over that are counted and the count
//     is logged;
//   - when it exits, every request still waiting for it fails with
//     "mcp_remote_error: stdio server exited: <status>", and it is started again after
//     an exponential backoff with jitter (RestartBackoffInitial doubling up to
//     RestartBackoffMax); a child that ran for RestartResetAfter starts over at the
//     initial delay;
//   - stopping it closes its stdin (the MCP way of asking a stdio server to exit), then
//     sends SIGTERM to its process group, then SIGKILL after StopGrace.

// outputGrace is how long the bridge keeps reading a child's stdout and stderr after the
// child exited: a process it started may still hold them open.
const outputGrace = 2 * time.Second

// queueLength bounds the lines waiting to be written to a child's stdin.
const queueLength = 256

var errChildExited = errors.New("stdio server exited")

// child is one run of the command.
type child struct {
	gen     uint64
	pid     int
	started time.Time
	cmd     *exec.Cmd
	stdin   *os.File
	queue   chan []byte
	dead    chan struct{} // closed after the exit was handled
	status  string        // how it ended; set before dead is closed
}

// enqueue queues one line (without its newline) for the child's stdin.
func (c *child) enqueue(ctx context.Context, line []byte) error {
	select {
	case c.queue <- line:
		return nil
	case <-c.dead:
		return errChildExited
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tryEnqueue queues a line unless the queue is full; the stdout reader uses it, as it
// must never block on the child's stdin.
func (c *child) tryEnqueue(line []byte) bool {
	select {
	case c.queue <- line:
		return true
	default:
		return false
	}
}

func (c *child) writeLoop(log logr.Logger) {
	defer c.stdin.Close()
	for {
		select {
		case line := <-c.queue:
			if _, err := c.stdin.Write(append(line, '\n')); err != nil {
				log.V(1).Info("writing to the stdio server's stdin failed", "error", err.Error())
				return
			}
		case <-c.dead:
			return
		}
	}
}

// childSink receives what a child does; the Bridge implements it.
type childSink interface {
	childLine(c *child, line []byte)
	childOversized(c *child, s *topScanner, size int64)
	childExited(c *child, status string)
}

// notRunning says why no child runs and when the next one starts.
type notRunning struct {
	stopping  bool
	restartIn time.Duration
	lastExit  string
}

// supervisor runs the child and restarts it when it dies.
type supervisor struct {
	argv []string
	opts *Options
	log  logr.Logger
	sink childSink

	mu        sync.Mutex
	cur       *child
	gen       uint64
	failures  int
	nextStart time.Time
	lastExit  string
	stopping  bool
	starts    int

	lineCounters // of stderr

	// jitter returns a number in [0, 1); tests may fix it.
	jitter func() float64
	// onExit, when set, is told each exit's backoff delay (tests).
	onExit func(status string, delay time.Duration)
}

func newSupervisor(argv []string, opts *Options, log logr.Logger, sink childSink) *supervisor {
	return &supervisor{argv: argv, opts: opts, log: log, sink: sink, jitter: rand.Float64}
}

// running returns the running child, or nil and why there is none.
func (s *supervisor) running() (*child, notRunning) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && !s.stopping {
		return s.cur, notRunning{}
	}
	nr := notRunning{stopping: s.stopping, lastExit: s.lastExit}
	if d := time.Until(s.nextStart); d > 0 {
		nr.restartIn = d
	}
	return nil, nr
}

// run starts the child and restarts it until ctx ends; then it stops the child and
// returns once it exited.
func (s *supervisor) run(ctx context.Context) {
	for {
		if ctx.Err() != nil {
			s.mu.Lock()
			s.stopping = true
			s.mu.Unlock()
			return
		}
		c, err := s.start()
		if err != nil {
			delay := s.exited(nil, "could not start: "+err.Error(), 0)
			s.log.Error(err, "could not start the stdio server", "command", s.argv[0], "restartIn", delay.String())
		} else {
			s.log.Info("stdio server started", "command", s.argv[0], "pid", c.pid, "generation", c.gen)
			select {
			case <-c.dead:
			case <-ctx.Done():
				s.mu.Lock()
				s.stopping = true
				s.mu.Unlock()
				s.terminate(c)
				return
			}
		}
		s.mu.Lock()
		next := s.nextStart
		s.mu.Unlock()
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			s.mu.Lock()
			s.stopping = true
			s.mu.Unlock()
			return
		case <-timer.C:
		}
	}
}

// exited records an exit (c is nil when the start failed) and returns the delay before
// the next start.
func (s *supervisor) exited(c *child, status string, uptime time.Duration) time.Duration {
	s.mu.Lock()
	if s.cur == c {
		s.cur = nil
	}
	if c != nil && uptime >= s.opts.RestartResetAfter {
		s.failures = 0
	}
	s.failures++
	delay := backoffDelay(s.failures, s.opts.RestartBackoffInitial, s.opts.RestartBackoffMax, s.jitter())
	if s.stopping {
		delay = 0
	}
	s.nextStart = time.Now().Add(delay)
	s.lastExit = status
	onExit := s.onExit
	s.mu.Unlock()
	if onExit != nil {
		onExit(status, delay)
	}
	return delay
}

// backoffDelay is initial·2^(failures-1), capped at max, times a jitter factor in
// [0.8, 1.2) (capped at max again): the delays still grow from one failure to the next
// until the cap, and restarts of many bridges do not line up.
func backoffDelay(failures int, initial, longest time.Duration, jitter float64) time.Duration {
	d := float64(initial) * math.Pow(2, float64(failures-1))
	if d > float64(longest) || math.IsInf(d, 0) {
		d = float64(longest)
	}
	d *= 0.8 + 0.4*jitter
	if d > float64(longest) {
		d = float64(longest)
	}
	return time.Duration(d)
}

// start starts one child and the goroutines that serve it.
func (s *supervisor) start() (*child, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd := exec.Command(s.argv[0], s.argv[1:]...) // list form: never a shell
	cmd.Env = s.opts.Env
	cmd.Dir = s.opts.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	cmd.SysProcAttr = childSysProcAttr()
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its ends now; keeping ours would hide its exit from the readers.
	_ = stdinR.Close()
	_ = stdoutW.Close()
	_ = stderrW.Close()

	s.mu.Lock()
	s.gen++
	s.starts++
	c := &child{
		gen:     s.gen,
		pid:     cmd.Process.Pid,
		started: time.Now(),
		cmd:     cmd,
		stdin:   stdinW,
		queue:   make(chan []byte, queueLength),
		dead:    make(chan struct{}),
	}
	s.cur = c
	s.mu.Unlock()

	log := s.log.WithValues("pid", c.pid)
	go c.writeLoop(log)
	var outputs sync.WaitGroup
	outputs.Add(2)
	go func() {
		defer outputs.Done()
		err := readMessages(stdoutR, s.opts.MaxMessageBytes,
			func(line []byte) { s.sink.childLine(c, line) },
			func(sc *topScanner, size int64) { s.sink.childOversized(c, sc, size) })
		if err != nil && !errors.Is(err, os.ErrClosed) {
			log.V(1).Info("reading the stdio server's stdout failed", "error", err.Error())
		}
	}()
	go func() {
		defer outputs.Done()
		s.copyStderr(stderrR, log)
	}()
	go func() {
		_ = cmd.Wait()
		status := cmd.ProcessState.String()
		read := make(chan struct{})
		go func() { outputs.Wait(); close(read) }()
		select {
		case <-read:
		case <-time.After(outputGrace):
			// Something the child started still holds its output open.
			signalGroup(cmd.Process, sigKill)
			_ = stdoutR.Close()
			_ = stderrR.Close()
			<-read
		}
		_ = stdoutR.Close()
		_ = stderrR.Close()
		uptime := time.Since(c.started)
		delay := s.exited(c, status, uptime)
		c.status = status
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			log.Info("stdio server stopped", "status", status)
		} else {
			log.Info("stdio server exited; restarting it", "status", status,
				"uptime", uptime.Round(time.Millisecond).String(), "restartIn", delay.Round(time.Millisecond).String())
		}
		s.sink.childExited(c, status)
		close(c.dead)
	}()
	return c, nil
}

// terminate stops a child: close its stdin, then SIGTERM to its process group, then
// SIGKILL after StopGrace. It returns once the exit was handled.
func (s *supervisor) terminate(c *child) {
	_ = c.stdin.Close()
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-c.dead:
			return true
		case <-t.C:
			return false
		}
	}
	if wait(min(time.Second, s.opts.StopGrace/2)) {
		return
	}
	signalGroup(c.cmd.Process, sigTerm)
	if wait(s.opts.StopGrace) {
		return
	}
	s.log.Info("stdio server did not exit after SIGTERM; killing it", "pid", c.pid, "grace", s.opts.StopGrace.String())
	signalGroup(c.cmd.Process, sigKill)
	<-c.dead
}

// copyStderr logs the child's stderr line by line, bounded in line length and rate.
func (s *supervisor) copyStderr(r io.Reader, log logr.Logger) {
	copyLines(r, log, "stderr", s.opts.StderrLineBytes, s.opts.StderrLinesPerSecond, &s.lineCounters, nil)
}

// LogLines logs r line by line the way a bridge logs its child's stderr (lines cut at
// DefaultStderrLineBytes, at most DefaultStderrLinesPerSecond logged a second); keep, when
// set, also receives every line. The operator's local runtime logs its bridges with it.
func LogLines(r io.Reader, log logr.Logger, msg string, keep io.Writer) {
	copyLines(r, log, msg, DefaultStderrLineBytes, DefaultStderrLinesPerSecond, &lineCounters{}, keep)
}

// lineCounters count what copyLines did.
type lineCounters struct {
	lines, dropped, truncated atomic.Int64
}

// copyLines logs each line of r as msg with the line as "line": lines longer than
// lineBytes are cut (their cut length is logged as "truncatedBytes"), and at most
// perSecond lines a second are logged; the count of the others is logged when the next
// second begins and at EOF. When keep is set, every line is also written to it.
func copyLines(r io.Reader, log logr.Logger, msg string, lineBytes, perSecond int, n *lineCounters, keep io.Writer) {
	br := bufio.NewReaderSize(r, lineBytes)
	limit := lineLimiter{perSecond: perSecond}
	report := func(dropped int64) {
		if dropped > 0 {
			log.Info("dropped "+msg+" lines", "dropped", dropped, "limit", fmt.Sprintf("%d lines/s", perSecond))
		}
	}
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			line := string(trimEOL(chunk))
			var truncated int64
			if errors.Is(err, bufio.ErrBufferFull) {
				truncated, err = discardLine(br)
			}
			if keep != nil {
				_, _ = io.WriteString(keep, line+"\n")
			}
			n.lines.Add(1)
			ok, dropped := limit.allow(time.Now())
			report(dropped)
			switch {
			case !ok:
				n.dropped.Add(1)
			case truncated > 0:
				n.truncated.Add(1)
				log.Info(msg, "line", line, "truncatedBytes", truncated)
			default:
				log.Info(msg, "line", line)
			}
		}
		if err != nil {
			report(limit.flush())
			return
		}
	}
}

// discardLine skips the rest of a line and returns how many bytes it skipped.
func discardLine(br *bufio.Reader) (int64, error) {
	var n int64
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(trimEOL(chunk)))
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, err
		}
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// lineLimiter lets at most perSecond lines through in each one-second window and counts
// the others; allow reports the count of the previous window when a new one begins.
type lineLimiter struct {
	perSecond int
	window    time.Time
	n         int
	dropped   int64
}

func (l *lineLimiter) allow(now time.Time) (ok bool, droppedBefore int64) {
	if now.Sub(l.window) >= time.Second {
		droppedBefore = l.flush()
		l.window, l.n = now, 0
	}
	if l.n >= l.perSecond {
		l.dropped++
		return false, droppedBefore
	}
	l.n++
	return true, droppedBefore
}

func (l *lineLimiter) flush() int64 {
	d := l.dropped
	l.dropped = 0
	return d
}
