package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"

	"github.com/mark3labs/mcp-go/server"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/listing"
)

// Imported tools are listed exactly as their remote defined them. mcp-go builds every
// tools/list entry from its typed mcp.Tool, which drops members it does not know and
// always writes "annotations" (even {} for a remote that sent none), so the answers to
// tools/list are rewritten on their way out: each imported tool's entry is replaced by
// the remote's definition under the served name.

// Definitions maps a served name to its tools/list entry, for the tools whose config
// carries the remote's definition.
type Definitions map[string]json.RawMessage

// DefinitionsOf builds the served entries once per config: the remote's definition
// with the served name.
func DefinitionsOf(tools []*Tool) Definitions {
	defs := Definitions{}
	for _, t := range tools {
		// A definition that is not an object is refused by the config check; mcp-go's
		// entry is served meanwhile.
		if entry, ok := listing.RemoteEntry(t.Name, t.Backend.Definition); ok {
			defs[t.Name] = entry
		}
	}
	return defs
}

// ModernDefinitionsOf are the entries listed to callers of protocol 2026-07-28: defs,
// with the remote's definition of that era where it differs
// (RemoteBackend.ModernDefinition). defs itself when no tool has one.
func ModernDefinitionsOf(tools []*Tool, defs Definitions) Definitions {
	var modern Definitions
	for _, t := range tools {
		entry, ok := listing.RemoteEntry(t.Name, t.Backend.ModernDefinition)
		if !ok {
			continue
		}
		if modern == nil {
			modern = maps.Clone(defs)
		}
		modern[t.Name] = entry
	}
	if modern == nil {
		return defs
	}
	return modern
}

// CallerEra is the protocol era of the caller of ctx: adapterconfig.EraModern for a
// request of 2026-07-28, else EraLegacy.
func CallerEra(ctx context.Context) string {
	if server.IsModernRequest(ctx) {
		return adapterconfig.EraModern
	}
	return adapterconfig.EraLegacy
}

// rewriteMessage replaces the imported tools' entries in msg when it is the answer to
// a tools/list (a result with a "tools" array); any other message, or one that needs
// no change, is returned as is.
func (defs Definitions) rewriteMessage(msg []byte) []byte {
	if len(defs) == 0 || !bytes.Contains(msg, []byte(`"tools"`)) {
		return msg
	}
	return rewriteResult(msg, defs.replaceTools)
}

// replaceTools replaces the imported tools' entries in a tools/list result's "tools"
// array, and says whether it replaced any (a tools/call result is left alone).
func (defs Definitions) replaceTools(result map[string]json.RawMessage) bool {
	var entries []json.RawMessage
	if _, isCall := result["content"]; isCall || json.Unmarshal(result["tools"], &entries) != nil || entries == nil {
		return false
	}
	changed := false
	for i, entry := range entries {
		var head struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(entry, &head) != nil {
			continue
		}
		if def, ok := defs[head.Name]; ok {
			entries[i], changed = def, true
		}
	}
	if changed {
		result["tools"], _ = json.Marshal(entries)
	}
	return changed
}

// rewriteResult lets edit change the members of msg's result when msg is a JSON-RPC
// answer with an object result, and encodes the answer again when edit says it changed
// them; any other message, or one edit leaves, is returned as is.
func rewriteResult(msg []byte, edit func(result map[string]json.RawMessage) (changed bool)) []byte {
	var envelope map[string]json.RawMessage
	if json.Unmarshal(msg, &envelope) != nil {
		return msg
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(envelope["result"], &result) != nil || result == nil {
		return msg
	}
	if !edit(result) {
		return msg
	}
	envelope["result"], _ = json.Marshal(result)
	out, err := json.Marshal(envelope)
	if err != nil {
		return msg
	}
	return out
}

// rewriteEvents applies rewriteMessage to the data of every event in an event-stream
// chunk (mcp-go writes each event whole, data on one line).
func (defs Definitions) rewriteEvents(chunk []byte) []byte {
	if len(defs) == 0 || !bytes.Contains(chunk, []byte(`"tools"`)) {
		return chunk
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(chunk))
	sc.Buffer(nil, len(chunk)+1)
	sc.Split(scanLinesKeepingEnds)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			out.Write(line)
			continue
		}
		body := bytes.TrimRight(data, "\r\n")
		end := data[len(body):]
		lead := len(body) - len(bytes.TrimLeft(body, " "))
		out.WriteString("data:")
		out.Write(body[:lead])
		out.Write(defs.rewriteMessage(body[lead:]))
		out.Write(end)
	}
	return out.Bytes()
}

// scanLinesKeepingEnds is bufio.ScanLines keeping each line's end, so a chunk is
// rewritten without changing its framing.
func scanLinesKeepingEnds(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// AnswerRewriter holds back the answer to one list POST (streamable HTTP) to rewrite
// it: a JSON body whole, an event stream event by event (or as is, without an events
// rewrite). Finish writes a held answer.
type AnswerRewriter struct {
	http.ResponseWriter
	message, events func([]byte) []byte
	status          int
	body            bytes.Buffer
	stream          bool // the answer is an event stream: written through, rewritten per write
}

// NewListAnswerWriter rewrites the tools/list answer written to w with defs.
func NewListAnswerWriter(w http.ResponseWriter, defs Definitions) *AnswerRewriter {
	return &AnswerRewriter{ResponseWriter: w, message: defs.rewriteMessage, events: defs.rewriteEvents}
}

// WriteHeader holds the status back, but for an event stream.
func (w *AnswerRewriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	if mediaTypeOf(w.Header()) == "text/event-stream" {
		w.stream = true
		w.ResponseWriter.WriteHeader(status)
	}
}

// Write holds a JSON body back and rewrites an event stream's events on their way.
func (w *AnswerRewriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.stream {
		return w.body.Write(p)
	}
	if w.events == nil {
		return w.ResponseWriter.Write(p)
	}
	if _, err := w.ResponseWriter.Write(w.events(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush flushes an event stream.
func (w *AnswerRewriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.stream {
		f.Flush()
	}
}

// Unwrap is the response w wraps, for http.ResponseController.
func (w *AnswerRewriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Finish writes a held-back answer, rewritten.
func (w *AnswerRewriter) Finish() {
	if w.stream || w.status == 0 {
		return
	}
	body := w.body.Bytes()
	if w.status >= 200 && w.status <= 299 {
		body = w.message(bytes.TrimRight(body, "\n"))
	}
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(w.status)
	_, _ = w.ResponseWriter.Write(body)
}

// StreamEventWriter rewrites the events of a long-lived stream (the sse transport's
// GET /sse, where the answers to its POSTs arrive).
// The definitions are those of the tool set served when the event is written.
type StreamEventWriter struct {
	http.ResponseWriter
	Definitions func() Definitions
}

// Write rewrites the events of p.
func (w StreamEventWriter) Write(p []byte) (int, error) {
	if _, err := w.ResponseWriter.Write(w.Definitions().rewriteEvents(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush flushes the stream.
func (w StreamEventWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap is the response w wraps, for http.ResponseController.
func (w StreamEventWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// mediaTypeOf is the Content-Type without parameters, lower case.
func mediaTypeOf(h http.Header) string {
	mt, _, _ := bytes.Cut([]byte(h.Get("Content-Type")), []byte(";"))
	return string(bytes.ToLower(bytes.TrimSpace(mt)))
}
