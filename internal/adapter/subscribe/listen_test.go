package subscribe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/adapter/gateway"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
)

// A listen stream adds the established URIs to mcp-go's acknowledgement, even when
// mcp-go writes it in pieces; an update that arrives before it is written after it;
// mcp-go's answer is dropped once acknowledged; after the stream stops, no update is
// written and notify says the stream ended.
func TestListenStream_AcknowledgesThenUpdates(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "text/event-stream")
	stream := newListenStream(rec, json.RawMessage(`"L1"`))
	stream.established = []string{"test://doc"}
	stop := stream.deliverWhile(context.Background())

	if err := stream.notify("test://doc"); err != nil {
		t.Fatal(err)
	}
	// The deliverer takes the wake-up, and must wait for the acknowledgement.
	testkit.EventuallyTrue(t, 5*time.Second, "the deliverer to take the wake-up", func() bool { return len(stream.wake) == 0 })
	ack := `event: message` + "\n" + `data: {"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"},"notifications":{"toolsListChanged":true}}}` + "\n\n"
	for _, piece := range []string{ack[:30], ack[30:]} {
		if _, err := stream.Write([]byte(piece)); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 5*time.Second, "the update written after the acknowledgement", func() error {
		if b := body(stream); !strings.Contains(b, "notifications/resources/updated") {
			return fmt.Errorf("the stream holds:\n%s", b)
		}
		return nil
	})
	if _, err := stream.Write([]byte(`event: message` + "\n" + `data: {"jsonrpc":"2.0","id":"L1","result":{}}` + "\n\n")); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := stream.notify("test://doc"); !errors.Is(err, gateway.ErrSessionEnded) {
		t.Errorf("notify after the stream stopped: %v, want ErrSessionEnded", err)
	}

	events := strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n")
	if len(events) != 2 {
		t.Fatalf("got %d events, want the acknowledgement and one update:\n%s", len(events), rec.Body.String())
	}
	var got struct {
		Method string `json:"method"`
		Params struct {
			Meta          map[string]any `json:"_meta"`
			URI           string         `json:"uri"`
			Notifications map[string]any `json:"notifications"`
		} `json:"params"`
	}
	if err := json.Unmarshal(eventData([]byte(events[0])), &got); err != nil {
		t.Fatal(err)
	}
	if list, _ := got.Params.Notifications["resourceSubscriptions"].([]any); len(list) != 1 || list[0] != "test://doc" || got.Params.Notifications["toolsListChanged"] != true {
		t.Errorf("the acknowledgement's notifications are %v, want mcp-go's and resourceSubscriptions [test://doc]", got.Params.Notifications)
	}
	if err := json.Unmarshal(eventData([]byte(events[1])), &got); err != nil {
		t.Fatal(err)
	}
	if got.Method != "notifications/resources/updated" || got.Params.URI != "test://doc" || got.Params.Meta["io.modelcontextprotocol/subscriptionId"] != "L1" {
		t.Errorf("the update is %+v, want test://doc tagged with subscription id L1", got)
	}
}

// body is what was written to the recorder so far, read under the stream's lock.
func body(l *listenStream) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.(*httptest.ResponseRecorder).Body.String()
}

// An answer that is not an event stream (mcp-go refused the request) passes unchanged.
func TestListenStream_PassesARefusal(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	stream := newListenStream(rec, json.RawMessage(`1`))
	const refusal = `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no"}}`
	if _, err := stream.Write([]byte(refusal)); err != nil {
		t.Fatal(err)
	}
	if rec.Body.String() != refusal || stream.acknowledged() {
		t.Errorf("wrote %q (acknowledged %v), want the refusal unchanged", rec.Body.String(), stream.acknowledged())
	}
}

// mcp-go, asked for nothing but the resource subscriptions the gateway took out,
// answers at once and may lose its acknowledgement: the stream acknowledges in its
// place, and drops the answer.
func TestListenStream_AcknowledgesForALostAcknowledgement(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "text/event-stream")
	stream := newListenStream(rec, json.RawMessage(`3`))
	stream.established = []string{"test://doc"}
	if _, err := stream.Write([]byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n\n")); err != nil {
		t.Fatal(err)
	}
	out := rec.Body.String()
	if !stream.acknowledged() || strings.Count(out, "\n\n") != 1 || !strings.Contains(out, `"method":"notifications/subscriptions/acknowledged"`) ||
		!strings.Contains(out, `"resourceSubscriptions":["test://doc"]`) || !strings.Contains(out, `"io.modelcontextprotocol/subscriptionId":3`) {
		t.Errorf("wrote %q, want one acknowledgement naming test://doc with subscription id 3", out)
	}
}
