package adapter

import (
	"context"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// In Search mode a client that keeps a session is told when find_tools found it new
// tools: they join that session's tools/list (notifications/tools/list_changed), so a
// client that reacts to list changes offers the model the found tools themselves, and
// not only call_tool. Other sessions' lists do not change; a stateless client, which
// has no session to remember them for, calls them by name or through call_tool.

const (
	// maxFoundSessions bounds the sessions whose found tools are remembered; the one
	// used least recently is forgotten first (its list goes back to the pinned tools).
	maxFoundSessions = 4096
	// maxFoundPerSession bounds the found tools one session's list gains; later finds
	// still answer, and their tools are called through call_tool or by name.
	maxFoundPerSession = 32
)

// foundTools remembers, per session, the tools find_tools found for it.
type foundTools struct {
	sessions *lru.Cache[string, *foundSet]
}

type foundSet struct {
	mu    sync.Mutex
	names map[string]struct{}
}

func newFoundTools() *foundTools {
	cache, _ := lru.New[string, *foundSet](maxFoundSessions) // fails only for a size ≤ 0
	return &foundTools{sessions: cache}
}

// sessionOf is the id of the session ctx's request belongs to, "" when the request
// has none to remember tools for (a stateless server's requests each get a throwaway
// session).
func sessionOf(ctx context.Context, stateful bool) string {
	if !stateful {
		return ""
	}
	if session := server.ClientSessionFromContext(ctx); session != nil {
		return session.SessionID()
	}
	return ""
}

// add remembers names for session and reports whether its list gained any.
func (f *foundTools) add(session string, names []string) bool {
	if session == "" || len(names) == 0 {
		return false
	}
	set, ok := f.sessions.Get(session)
	if !ok {
		set = &foundSet{names: map[string]struct{}{}}
		if prior, loaded, _ := f.sessions.PeekOrAdd(session, set); loaded {
			set = prior
		}
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	added := false
	for _, name := range names {
		if _, known := set.names[name]; known || len(set.names) >= maxFoundPerSession {
			continue
		}
		set.names[name] = struct{}{}
		added = true
	}
	return added
}

// keep reports whether session's list holds name because find_tools found it there.
func (f *foundTools) keep(session, name string) bool {
	if session == "" {
		return false
	}
	set, ok := f.sessions.Peek(session)
	if !ok {
		return false
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	_, found := set.names[name]
	return found
}

// announce tells ctx's session that its tool list changed; the notification rides the
// find_tools answer's stream, so a client without a GET stream sees it too.
func announceListChanged(ctx context.Context, srv *server.MCPServer) error {
	return srv.SendNotificationToClient(ctx, string(mcp.MethodNotificationToolsListChanged), nil)
}
