package stdioproxy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestScanMembers(t *testing.T) {
	for _, tc := range []struct {
		line, id, method string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, `1`, `"tools/list"`},
		{`{"result":{"id":99,"tools":[{"id":"x"}]},"jsonrpc":"2.0","id":12}`, `12`, ``},
		{`{ "method" : "a" , "params" : {"s":"}\"{,"} , "id" : "q\"}" }`, `"q\"}"`, `"a"`},
		{`{"params":["id",{"id":[1,2]}],"id":-3.5e2}`, `-3.5e2`, ``},
		{`{"error":{"code":-1,"message":"x"},"id":null}`, `null`, ``},
		{`{"method":"notifications/initialized"}`, ``, `"notifications/initialized"`},
		{"{\n\t\"id\" :\t7\n}", `7`, ``},
		{`{"ids":1,"i":2,"id":3}`, `3`, ``},
	} {
		m := scanMembers([]byte(tc.line))
		id, hasID := m["id"]
		if (tc.id != "") != hasID || string(id.raw) != tc.id {
			t.Errorf("%s: id %q (found %v), want %q", tc.line, id.raw, hasID, tc.id)
		}
		if hasID && tc.line[id.start:id.end] != tc.id {
			t.Errorf("%s: id span %d..%d = %q", tc.line, id.start, id.end, tc.line[id.start:id.end])
		}
		method, hasMethod := m["method"]
		if (tc.method != "") != hasMethod || string(method.raw) != tc.method {
			t.Errorf("%s: method %q, want %q", tc.line, method.raw, tc.method)
		}
		if hasID {
			out := splice([]byte(tc.line), id, []byte(`"new"`))
			var v map[string]any
			if err := json.Unmarshal(out, &v); err != nil || v["id"] != "new" {
				t.Errorf("%s: spliced %s (%v)", tc.line, out, err)
			}
		}
	}
}

func TestScanLargeValue(t *testing.T) {
	big := strings.Repeat("x", 2*maxCapture)
	m := scanMembers([]byte(`{"id":"` + big + `","method":"m"}`))
	if m["id"].raw != nil || m["id"].end-m["id"].start != int64(len(big)+2) {
		t.Errorf("a long id: %+v", m["id"])
	}
	if string(m["method"].raw) != `"m"` {
		t.Errorf("method after a long id: %q", m["method"].raw)
	}
}

// TestReadMessages: lines over the limit go to onOversized with their id found while
// streaming, whatever their position; the lines around them are intact.
func TestReadMessages(t *testing.T) {
	const limit = 100
	huge := strings.Repeat("y", 300<<10) // larger than the reader's buffer
	line2 := `{"result":"` + huge + `","jsonrpc":"2.0","id":2}`
	line3 := `{"id":3,"result":"` + strings.Repeat("z", 200) + `"}`
	input := strings.Join([]string{
		`{"id":1,"result":"small"}`,
		line2,
		line3 + "\r",
		``,
		`{"id":4,"result":"crlf"}` + "\r",
		`{"id":5,"result":"no newline at EOF"}`,
	}, "\n")
	var lines []string
	type over struct {
		id   string
		size int64
	}
	var overs []over
	err := readMessages(strings.NewReader(input), limit,
		func(l []byte) { lines = append(lines, string(l)) },
		func(s *topScanner, size int64) { overs = append(overs, over{string(s.members["id"].raw), size}) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"id":1,"result":"small"}`, `{"id":4,"result":"crlf"}`, `{"id":5,"result":"no newline at EOF"}`}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines %q, want %q", lines, want)
	}
	wantOver := []over{{"2", int64(len(line2))}, {"3", int64(len(line3))}}
	if len(overs) != 2 || overs[0] != wantOver[0] || overs[1] != wantOver[1] {
		t.Errorf("oversized %+v, want %+v", overs, wantOver)
	}
}

func TestReadMessagesExactLimit(t *testing.T) {
	line := `{"id":1,"result":"` + strings.Repeat("a", 50) + `"}`
	var got [][]byte
	var overs int
	_ = readMessages(strings.NewReader(line+"\n"), len(line),
		func(l []byte) { got = append(got, l) }, func(*topScanner, int64) { overs++ })
	if len(got) != 1 || !bytes.Equal(got[0], []byte(line)) || overs != 0 {
		t.Errorf("a line of exactly the limit: %q, %d oversized", got, overs)
	}
}
