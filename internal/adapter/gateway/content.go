package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A gateway re-exports its imports' prompts, resources and resource templates too: a
// resources/read of an imported URI, or a prompts/get of an imported prompt, goes to
// the remote that serves it on the pooled session its tools use, and the remote's
// result comes back as it sent it (text, blobs, embedded resources, _meta). Reads and
// gets change nothing at the remote, but they are retried exactly as calls are (once,
// when the remote provably did not process them), so the rules stay one.

// Item is one re-exported prompt, resource or resource template: its served key, its
// backend and, once a Pool linked it, the remote it reads from.
type Item struct {
	Key string
	// RemoteKey is the URI at the remote of a resource served under another (a skill's
	// file moved under a prefix); "" when it is Key.
	RemoteKey string
	Backend   *adapterconfig.RemoteBackend
	// Files are the files the gateway's imported skills list, with their digests: a
	// read of one of them is checked against its digest.
	Files SkillFiles

	remote *remote
}

// PrepareAll is Prepare for the tools and the items together: a remote that only
// items use is kept (or connected) as one that tools use is.
func (p *Pool) PrepareAll(tools []*Tool, items []*Item) (Linked, error) {
	linked, err := p.Prepare(tools)
	if err != nil || len(items) == 0 {
		return linked, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, it := range items {
		r, err := p.linkRemote(&linked, it.Backend)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q (import %s): %w", it.Key, it.Backend.Import, err))
			continue
		}
		it.remote = r
	}
	if err := errors.Join(errs...); err != nil {
		return Linked{}, err
	}
	return linked, nil
}

// ForwardError is a read or get that got no result: the remote's JSON-RPC error (RPC
// set, its message scrubbed of header values), or no answer (RPC nil; Message begins
// with MarkerCallFailed).
type ForwardError struct {
	RPC     *mcpclient.RPCError
	Message string
	// Connect, when set, asks the caller to connect an account first: the read or get
	// is answered URLElicitationRequiredError (-32042) carrying it.
	Connect *mcp.URLElicitationRequiredError
	// Status, when set, is the HTTP status to answer with (a refused requestState is
	// answered 400, as a server refuses a state it did not give); else 200.
	Status int
}

func (e *ForwardError) Error() string { return e.Message }

// Unwrap lets mcp-go answer a connect prompt as -32042 (the sse transport's reads).
func (e *ForwardError) Unwrap() error {
	if e.Connect == nil {
		return nil
	}
	return *e.Connect
}

// ReadResource forwards resources/read of uri (the item's URI, or one its template
// matched) and returns the remote's result as sent; for an item served under another
// URI than the remote's, the remote's URI is asked for and the contents say the served
// one (their text and blobs untouched).
//
// A file an imported skill lists (it.Files) is served only with the bytes of the digest
// the skill lists: a skill's entry is what an owner approves, and a remote that keeps
// listing the approved digest while it serves other bytes would otherwise change what
// agents read under that approval. Its read is answered with the checked result, or
// refused with an error beginning definition_changed:.
func (it *Item) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	asked := uri
	if it.RemoteKey != "" && uri == it.Key {
		asked = it.RemoteKey
	}
	raw, err := it.remote.forwardRequest(ctx, it, func(ctx context.Context, s *mcpclient.Session) (json.RawMessage, error) {
		return s.ReadResource(ctx, asked)
	})
	if err != nil {
		return raw, err
	}
	if want, listed := it.Files[uri]; listed {
		if raw, err = listedBytes(raw, asked, want); err != nil {
			return nil, &ForwardError{Message: fmt.Sprintf("%sthe remote answered a read of %s with other bytes than its skill lists (digest %s), so they are not served; a gateway serves them once the import's handshake lists their digest and, in Manual approval mode, its owner approves it (import %s): %v",
				MarkerDefinitionChanged, uri, want, it.Backend.Import, err)}
		}
	}
	if asked == uri {
		return raw, nil
	}
	return withContentsURI(raw, asked, uri), nil
}

// MarkerDefinitionChanged begins the error of a read whose bytes are not those the
// definition served for them lists.
const MarkerDefinitionChanged = "definition_changed: "

// SkillFiles maps the served URI of each file the imported skills list to the digest
// listed for it ("sha256:" and hex).
type SkillFiles map[string]string

// AddSkill records the files an imported skill's entry lists: key is the served URI of
// its SKILL.md and entry its skills/list entry with served URIs, whose resources' uri
// and digest are read by their exact names, as the entry's digest reads them. Only files
// under the skill's own directory are recorded: a skill has no say over another item's
// bytes.
func (f SkillFiles) AddSkill(key string, entry json.RawMessage) {
	dir, ok := strings.CutSuffix(key, adapterconfig.SkillManifestFile)
	if !ok || !strings.HasPrefix(dir, adapterconfig.SkillURIScheme) {
		return
	}
	var members map[string]json.RawMessage
	var resources []map[string]json.RawMessage
	if json.Unmarshal(entry, &members) != nil || json.Unmarshal(members["resources"], &resources) != nil {
		return
	}
	for _, r := range resources {
		var uri, digest string
		if json.Unmarshal(r["uri"], &uri) == nil && json.Unmarshal(r["digest"], &digest) == nil && strings.HasPrefix(uri, dir) {
			f[uri] = digest
		}
	}
}

// contentMembers are the members of a resources/read content that a client reads by
// name: a content spelling one in another case is refused, as list entries are.
var contentMembers = []string{"uri", "mimeType", "text", "blob", "_meta"}

// listedBytes checks that raw, the result of a read of the file asked, holds exactly one
// content, of that URI, whose text (its UTF-8 bytes) or blob (base64) has the sha256 of
// want, and returns the result as it was checked: re-encoded from what was decoded, so
// that a client never reads another value of a member sent twice.
func listedBytes(raw json.RawMessage, asked, want string) (json.RawMessage, error) {
	var result map[string]json.RawMessage
	var contents []map[string]json.RawMessage
	if json.Unmarshal(raw, &result) != nil || json.Unmarshal(result["contents"], &contents) != nil {
		return nil, errors.New("the answer is not a read result")
	}
	if len(contents) != 1 {
		return nil, fmt.Errorf("the answer holds %d contents, not the one file", len(contents))
	}
	content := contents[0]
	for key := range content {
		for _, name := range contentMembers {
			if key != name && strings.EqualFold(key, name) {
				return nil, fmt.Errorf("its contents carry the member %q, a case variant of %q", key, name)
			}
		}
	}
	data, err := contentBytes(content, asked)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := adapterconfig.DigestPrefix + hex.EncodeToString(sum[:]); got != strings.ToLower(want) {
		return nil, fmt.Errorf("its bytes have the digest %s", got)
	}
	if result["contents"], err = marshalKeepingHTML(contents); err != nil {
		return nil, err
	}
	return marshalKeepingHTML(result)
}

// contentBytes are the bytes of a content of the URI asked: its text's or its blob's.
func contentBytes(content map[string]json.RawMessage, asked string) ([]byte, error) {
	var uri string
	var text, blob *string
	if json.Unmarshal(content["uri"], &uri) != nil || uri != asked {
		return nil, fmt.Errorf("its contents are of %s, not of the file", content["uri"])
	}
	if raw, ok := content["text"]; ok && json.Unmarshal(raw, &text) != nil {
		return nil, errors.New("its text is not a string")
	}
	if raw, ok := content["blob"]; ok && json.Unmarshal(raw, &blob) != nil {
		return nil, errors.New("its blob is not a string")
	}
	switch {
	case text != nil && blob == nil:
		return []byte(*text), nil
	case blob != nil && text == nil:
		data, err := base64.StdEncoding.DecodeString(*blob)
		if err != nil {
			return nil, errors.New("its blob is not base64")
		}
		return data, nil
	}
	return nil, errors.New("its contents hold neither a text nor a blob, or both")
}

// withContentsURI is a resources/read result whose contents of URI from say to
// instead; every other byte of each content (text, blob, _meta) is kept as sent.
func withContentsURI(raw json.RawMessage, from, to string) json.RawMessage {
	var result map[string]json.RawMessage
	var contents []map[string]json.RawMessage
	if json.Unmarshal(raw, &result) != nil || json.Unmarshal(result["contents"], &contents) != nil {
		return raw
	}
	for _, c := range contents {
		var uri string
		if json.Unmarshal(c["uri"], &uri) == nil && uri == from {
			c["uri"] = toJSON(to)
		}
	}
	var err error
	if result["contents"], err = marshalKeepingHTML(contents); err != nil {
		return raw
	}
	out, err := marshalKeepingHTML(result)
	if err != nil {
		return raw
	}
	return out
}

func toJSON(s string) json.RawMessage {
	b, _ := marshalKeepingHTML(s)
	return b
}

// marshalKeepingHTML is json.Marshal without escaping <, > and & in strings, so that
// raw members pass through with their bytes.
func marshalKeepingHTML(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// GetPrompt forwards prompts/get of the item's prompt (its name at the remote) with
// args (a JSON object, or empty) and, on a retry, the caller's answers to what the
// remote asked (their requestState the gateway's, as askCallerForPrompt sealed it). It
// returns the remote's result as sent, or the gateway's input-required result in place
// of the remote's.
func (it *Item) GetPrompt(ctx context.Context, args json.RawMessage, answers mcpclient.InputAnswers) (json.RawMessage, error) {
	upstream, err := it.openAnswers(ctx, answers)
	if err != nil {
		return nil, err
	}
	raw, err := it.remote.forwardRequest(ctx, it, func(ctx context.Context, s *mcpclient.Session) (json.RawMessage, error) {
		return s.GetPromptWith(ctx, it.Backend.RemoteName, args, upstream)
	})
	if err != nil || !inputRequired(raw) {
		return raw, err
	}
	return it.askCallerForPrompt(ctx, raw)
}

// Complete forwards completion/complete about the item (a prompt by its name at the
// remote, a resource template by its URI template) and returns the remote's result as
// sent. resolved, when set, is the context of arguments already chosen.
func (it *Item) Complete(ctx context.Context, argument, resolved any) (json.RawMessage, error) {
	ref := map[string]string{"type": "ref/resource", "uri": it.Key}
	if it.Backend.RemoteName != "" {
		ref = map[string]string{"type": "ref/prompt", "name": it.Backend.RemoteName}
	}
	params := map[string]any{"ref": ref, "argument": argument}
	if resolved != nil {
		params["context"] = resolved
	}
	return it.remote.forwardRequest(ctx, it, func(ctx context.Context, s *mcpclient.Session) (json.RawMessage, error) {
		return s.Complete(ctx, params)
	})
}

// forwardRequest runs do on a pooled session within the item's timeout, retried as
// withSession retries; or, where the item's remote is spoken to in protocol 2026-07-28
// (upstreamModern), on a stateless session of that era. The error is a *ForwardError.
func (r *remote) forwardRequest(ctx context.Context, it *Item, do func(context.Context, *mcpclient.Session) (json.RawMessage, error)) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, it.Backend.Timeout.Duration)
	defer cancel()
	var raw json.RawMessage
	var client *mcpclient.Client
	var err error
	if upstreamModern(ctx, it.Backend) {
		meta := upstreamMeta(ctx, it.Backend.Relay)
		raw, client, err = r.withClient(ctx, "item", it.Key, func(ctx context.Context, c *mcpclient.Client) (json.RawMessage, error) {
			return do(ctx, c.Modern(*meta))
		})
	} else {
		raw, client, err = r.withSession(ctx, "item", it.Key, func(ctx context.Context, conn *remoteConn) (json.RawMessage, error) {
			return do(ctx, conn.sess)
		})
	}
	var rpcErr *mcpclient.RPCError
	switch {
	case err == nil:
		return raw, nil
	case client != nil && errors.As(err, &rpcErr):
		scrubbed := *rpcErr
		scrubbed.Message = client.Redact(rpcErr.Message)
		scrubbed.Data = nil // may echo what the remote was sent; the code and message say enough
		return nil, &ForwardError{RPC: &scrubbed, Message: MarkerRemoteError + scrubbed.Error()}
	default:
		return nil, r.requestFailed(ctx, it, err)
	}
}

func (r *remote) requestFailed(ctx context.Context, it *Item, err error) *ForwardError {
	if text, ok := r.credentialFailure(err); ok {
		var ce *CallerCredentialError
		if errors.As(err, &ce) && ce.Connect != nil {
			return &ForwardError{Message: text, Connect: &mcp.URLElicitationRequiredError{
				Elicitations: []mcp.ElicitationParams{ce.Connect.elicitation(newElicitationID())}}}
		}
		return &ForwardError{Message: text}
	}
	detail := err.Error()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		detail = fmt.Sprintf("no answer from the remote within %s (%s)", it.Backend.Timeout.Duration, detail)
	}
	return &ForwardError{Message: fmt.Sprintf("%s%s (import %s)", MarkerCallFailed, detail, it.Backend.Import)}
}
