package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// Only a successful tool result passes untouched; an error, however it is spelled,
// goes to remoteResult for its marker.
func TestSuccessfulToolResult(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"content":[{"type":"text","text":"ok"}]}`:                     true,
		`{"content":[],"isError":false}`:                                true,
		`{"content":[{"type":"text","text":"isError"}]}`:                true,
		`{"content":[{"type":"text","text":"no"}],"isError":true}`:      false,
		`{"content":[{"type":"text","text":"no"}],"\u0069sError":true}`: false,
		`{"structuredContent":{}}`:                                      false,
		`{"content":"not a list"}`:                                      false,
		`["content"]`:                                                   false,
	} {
		if got := successfulToolResult(json.RawMessage(raw)); got != want {
			t.Errorf("successfulToolResult(%s) = %v, want %v", raw, got, want)
		}
	}
}

// A remote's pretty-printed result, written into the event stream a log message opened,
// stays one event whose data is the whole response (issue 23, finding 15): a newline in
// the data would end the event early and leave the rest as stray fields.
func TestStreamedAnswerIsOneEventLine(t *testing.T) {
	rec := httptest.NewRecorder()
	a := &answerWriter{w: rec, id: json.RawMessage(`7`)}
	a.notify(mcpclient.Message{JSONRPC: "2.0", Method: "notifications/message", Params: json.RawMessage(`{"level":"info","data":"working"}`)})
	a.answer(json.RawMessage("{\n  \"content\": [\n    {\"type\": \"text\", \"text\": \"done\"}\n  ]\n}"))

	events := strings.Split(strings.TrimSpace(rec.Body.String()), "\n\n")
	if len(events) != 2 {
		t.Fatalf("want a log event and the answer, got %d events:\n%s", len(events), rec.Body.String())
	}
	lines := strings.Split(events[1], "\n")
	if len(lines) != 2 || lines[0] != "event: message" || !strings.HasPrefix(lines[1], "data: ") {
		t.Fatalf("the answer is not one event with one data line:\n%s", events[1])
	}
	var response struct {
		ID     int `json:"id"`
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &response); err != nil || response.ID != 7 || response.Result.Content[0].Text != "done" {
		t.Fatalf("data %q: %v %+v", lines[1], err, response)
	}
}
