package mcpclient_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	. "github.com/cantus-dev/cantus-operator/internal/mcpclient"
	"github.com/cantus-dev/cantus-operator/test/testenv/taskremote"
)

// A remote of 2026-07-28 that announces the Tasks extension in server/discover is
// recorded with it (ModernExtensions), and a modern session reaches its tasks with
// Request: tasks/get goes with the taskId in params and in Mcp-Name.
func TestProbe_ModernRemoteRecordsTheTasksExtensionAndRequestReachesItsTasks(t *testing.T) {
	remote := taskremote.Start(t)
	res := probeOf(t, remote.URL)
	if !slices.Contains(res.ModernExtensions, taskremote.Extension) {
		t.Fatalf("modern extensions %v, want the Tasks extension", res.ModernExtensions)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(ClientOptions{URL: remote.URL})
	if err != nil {
		t.Fatal(err)
	}
	declared := &RequestMeta{ClientCapabilities: json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}
	s := c.Modern(RequestMeta{})
	raw, err := s.CallToolWith(ctx, taskremote.ToolJob, nil, CallOptions{Meta: declared})
	if err != nil {
		t.Fatal(err)
	}
	var task struct {
		ResultType, TaskID string
	}
	if err := json.Unmarshal(raw, &task); err != nil || task.ResultType != "task" {
		t.Fatalf("the call got %s, want a task", raw)
	}
	if _, err := s.Request(ctx, string(MethodTasksGet), map[string]string{"taskId": task.TaskID}, declared); err != nil {
		t.Fatalf("tasks/get: %v", err)
	}
	gets := remote.Requests("tasks/get")
	if len(gets) != 1 || gets[0].TaskID != task.TaskID || gets[0].McpName != task.TaskID || gets[0].McpMethod != "tasks/get" || !gets[0].Declared {
		t.Errorf("the remote got %+v, want one tasks/get of %q with its Mcp-Name", gets, task.TaskID)
	}
}
