package mcpclient

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestEncode(t *testing.T) {
	t.Parallel()
	data, err := EncodeRequest(3, "tools/list", map[string]any{"cursor": "c"})
	if err != nil || string(data) != `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"c"}}` {
		t.Errorf("EncodeRequest = %s, %v", data, err)
	}
	if data, _ := EncodeRequest(4, "ping", nil); string(data) != `{"jsonrpc":"2.0","id":4,"method":"ping"}` {
		t.Errorf("EncodeRequest without params = %s", data)
	}
	if _, err := EncodeRequest(5, "x", func() {}); err == nil {
		t.Error("EncodeRequest of unencodable params: no error")
	}
	if got := string(Notification("notifications/initialized")); got != `{"jsonrpc":"2.0","method":"notifications/initialized"}` {
		t.Errorf("Notification = %s", got)
	}
	params, _ := json.Marshal(InitializeParams("cantus", "1"))
	if string(params) != `{"capabilities":{},"clientInfo":{"name":"cantus","version":"1"},"protocolVersion":"`+ProtocolVersion+`"}` {
		t.Errorf("InitializeParams = %s", params)
	}
}

func TestParseMessages(t *testing.T) {
	t.Parallel()
	msgs, err := ParseMessages([]byte(` {"jsonrpc":"2.0","id":1,"result":{"ok":true}} `))
	if err != nil || len(msgs) != 1 || string(msgs[0].ID) != "1" || string(msgs[0].Result) != `{"ok":true}` {
		t.Errorf("one message: %+v, %v", msgs, err)
	}
	msgs, err = ParseMessages([]byte(`[{"jsonrpc":"2.0","method":"ping","id":"p","params":{}},{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no","data":[1]}}]`))
	if err != nil || len(msgs) != 2 {
		t.Fatalf("a batch: %+v, %v", msgs, err)
	}
	if msgs[0].Method != "ping" || string(msgs[0].Params) != "{}" {
		t.Errorf("the server's request: %+v", msgs[0])
	}
	if e := msgs[1].Error; e == nil || e.Code != -32601 || e.Message != "no" || string(e.Data) != "[1]" {
		t.Errorf("the error answer: %+v", msgs[1].Error)
	}
	for _, bad := range []string{``, `not json`, `[1]`, `"string"`} {
		if _, err := ParseMessages([]byte(bad)); err == nil {
			t.Errorf("ParseMessages(%q): no error", bad)
		}
	}
}

// ParseMessages decodes one message as encoding/json does, whichever way it takes:
// the member walk for plain messages, encoding/json for the rest.
func TestParseMessagesAsEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, data := range parseMessagesCases {
		wantParsedAsEncodingJSON(t, []byte(data))
	}
}

// parseMessagesCases are messages, and near-messages, the member walk takes or leaves.
var parseMessagesCases = []string{
	`{"jsonrpc":"2.0","id":"a\"b","result":{"contents":[{"uri":"x","text":"q\\\"}]\\","blob":"AA=="}],"_meta":{"n":1.50}}}`,
	` { "jsonrpc" : "2.0" , "id" : -1.5e3 , "result" : [ true , null , "}" ] } `,
	`{"id":null,"result":null,"error":null,"method":null}`,
	`{"jsonrpc":"2.0","id":1,"result":1,"result":{"last":"wins"},"vendor":{"x":[1,{"y":"]"}]}}`,
	`{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no","data":{"d":[1]}}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":1},"error":{"message":"merged"}}`,
	`{"JSONRPC":"2.0","Id":4,"Result":{}}`,
	`{"jsonrpc":"2.0","\u0069d":5,"result":{}}`,
	`{"jsonrpc":2,"id":6,"result":{}}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\u00e9\ud83d\ude00"}}`,
	`{"jsonrpc":"2.0","id":7,"result":{}`,
	`{}`,
}

func wantParsedAsEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	got, err := ParseMessages(data)
	var want Message
	wantErr := json.Unmarshal(bytes.TrimSpace(data), &want)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("ParseMessages(%s): error %v, encoding/json's %v", data, err, wantErr)
	}
	if err == nil && (len(got) != 1 || !reflect.DeepEqual(got[0], want)) {
		t.Fatalf("ParseMessages(%s)\n got %+v\nwant %+v", data, got, want)
	}
}

// validJSON accepts exactly what json.Valid accepts, at the edges of the grammar.
func TestValidJSONAsEncodingJSON(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", maxNestingDepth) + strings.Repeat("]", maxNestingDepth)
	for _, data := range append(validJSONCases, deep, "["+deep+"]") {
		if got, want := validJSON([]byte(data)), json.Valid([]byte(data)); got != want {
			t.Errorf("validJSON(%.80q) = %t, json.Valid %t", data, got, want)
		}
	}
}

// validJSONCases are values, and near-values, at the edges of the grammar.
var validJSONCases = []string{
	``, ` `, `0`, `-0`, `01`, `-`, `1.`, `.5`, `1.5e`, `1.5e+`, `1e-07`, `1E9`, `-12.50e+3`, `1x`,
	`true`, `tru`, `truex`, `nul`, `null `, ` false`, `"`, `""`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\a"`,
	`"\u00e9"`, `"\u00E"`, `"\u00eg"`, `"\uD83D\uDE00"`, "\"tab\tinside\"", "\"\x7f\xff\xfe\"", `"a"b`,
	`[]`, `[,]`, `[1,]`, `[1 2]`, `[ 1 , [ ] , { } ]`, `{}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a" : 1 , "b":[{"c":null}]}`,
	`{1:2}`, `{"a":1}}`, `[[]`, `{"a":"\"}"}`, "\r\n{}\t", `[1] [2]`,
}

func TestSupportedProtocolVersions(t *testing.T) {
	t.Parallel()
	v := SupportedProtocolVersions()
	if v[0] != ProtocolVersion || len(v) != 4 {
		t.Errorf("SupportedProtocolVersions = %v", v)
	}
	v[0] = "changed"
	if SupportedProtocolVersions()[0] != ProtocolVersion {
		t.Error("SupportedProtocolVersions shares its slice")
	}
}
