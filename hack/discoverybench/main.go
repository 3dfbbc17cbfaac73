// Command discoverybench measures progressive discovery (spec.discovery Search mode)
// over a corpus of real tool definitions, harvested at bench time from MCP servers
// others wrote (hack/discovery-corpus.sh), and a query set of agent tasks (ours). It
// prints one line:
//
//	discovery: tools=N queries=Q recall@5=R list_bytes_ratio=X find_p50_ms=Y find_http_p50_ms=Z
//
// recall@5 is the share of queries whose needed tool (any one of the query's tools) is
// among the first 5 found; list_bytes_ratio is the size of tools/list in Search mode
// (no pins: the two meta-tools) against All mode, both answered by a real adapter
// serving the corpus; find_p50_ms is the median in-process search over 1,000 tools
// (renamed copies of the corpus), find_http_p50_ms the median find_tools call over
// HTTP to an adapter serving those 1,000 tools.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cantus-dev/cantus-operator/internal/adapter"
	"github.com/cantus-dev/cantus-operator/internal/adapter/discovery"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/listing"
)

func main() {
	corpusPath := flag.String("corpus", "bin/discovery-corpus.json", "the corpus hack/discovery-corpus.sh harvested")
	queriesPath := flag.String("queries", "hack/discoverybench/queries.jsonl", `the query set: one {"query":…,"tools":[…]} per line`)
	k := flag.Int("k", 5, "recall is counted in the first k tools found")
	scale := flag.Int("latency-tools", 1000, "the number of tools the latency is measured over")
	rounds := flag.Int("rounds", 3000, "searches timed in-process")
	httpRounds := flag.Int("http-rounds", 500, "find_tools calls timed over HTTP")
	verbose := flag.Bool("v", false, "print each query the search misses")
	flag.Parse()
	if err := run(*corpusPath, *queriesPath, *k, *scale, *rounds, *httpRounds, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "discoverybench:", err)
		os.Exit(1)
	}
}

func run(corpusPath, queriesPath string, k, scale, rounds, httpRounds int, verbose bool) error {
	tools, err := loadCorpus(corpusPath)
	if err != nil {
		return err
	}
	queries, err := loadQueries(queriesPath, tools)
	if err != nil {
		return err
	}
	recall, err := recallAt(tools, queries, k, verbose)
	if err != nil {
		return err
	}
	ratio, err := listBytesRatio(tools)
	if err != nil {
		return err
	}
	many := renamedCopies(tools, scale)
	p50, err := searchP50(many, queries, rounds)
	if err != nil {
		return err
	}
	httpP50, err := httpFindP50(many, queries, httpRounds)
	if err != nil {
		return err
	}
	fmt.Printf("discovery: tools=%d queries=%d recall@%d=%.3f list_bytes_ratio=%.4f find_p50_ms=%.3f find_http_p50_ms=%.3f\n",
		len(tools.names), len(queries), k, recall, ratio, ms(p50), ms(httpP50))
	return nil
}

// corpus is the harvested tools by served name (the server's prefix, as a gateway's
// imports[].prefix would give it), each its tools/list entry under that name.
type corpus struct {
	names   []string
	entries map[string]json.RawMessage
}

// maxServerShare: no one server may make the benchmark its own.
const maxServerShare = 0.25

func loadCorpus(path string) (*corpus, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the corpus (make it with hack/discovery-corpus.sh): %w", err)
	}
	var harvested struct {
		Servers []struct {
			Server string            `json:"server"`
			Alias  string            `json:"alias"`
			Tools  []json.RawMessage `json:"tools"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(raw, &harvested); err != nil {
		return nil, fmt.Errorf("corpus %s: %w", path, err)
	}
	c := &corpus{entries: map[string]json.RawMessage{}}
	largest, largestServer := 0, ""
	for _, s := range harvested.Servers {
		for _, def := range s.Tools {
			var t struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(def, &t) != nil || t.Name == "" {
				continue
			}
			name := s.Alias + "_" + t.Name
			entry, ok := listing.RemoteEntry(name, def)
			if !ok {
				continue
			}
			c.names = append(c.names, name)
			c.entries[name] = entry
		}
		if len(s.Tools) > largest {
			largest, largestServer = len(s.Tools), s.Server
		}
	}
	if len(c.names) < 300 {
		return nil, fmt.Errorf("the corpus holds %d tools, fewer than 300: are the servers of test/mcp-peers/corpus installed?", len(c.names))
	}
	if share := float64(largest) / float64(len(c.names)); share > maxServerShare {
		return nil, fmt.Errorf("%s holds %.0f%% of the corpus, more than %.0f%%", largestServer, 100*share, 100*maxServerShare)
	}
	return c, nil
}

type benchQuery struct {
	Query string   `json:"query"`
	Tools []string `json:"tools"`
}

func loadQueries(path string, c *corpus) ([]benchQuery, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the queries: %w", err)
	}
	defer f.Close()
	var out []benchQuery
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var q benchQuery
		if err := json.Unmarshal([]byte(text), &q); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if q.Query == "" || len(q.Tools) == 0 {
			return nil, fmt.Errorf("%s:%d: want {\"query\":…,\"tools\":[…]} with a query and at least one tool", path, line)
		}
		for _, name := range q.Tools {
			if _, ok := c.entries[name]; !ok {
				return nil, fmt.Errorf("%s:%d: the corpus has no tool %q", path, line, name)
			}
		}
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("the query set is empty")
	}
	return out, nil
}

// recallAt is the share of queries with one of their tools among the first k found.
func recallAt(c *corpus, queries []benchQuery, k int, verbose bool) (float64, error) {
	index, err := discovery.Build(c.entries, nil)
	if err != nil {
		return 0, err
	}
	defer index.Close()
	hits := 0
	for _, q := range queries {
		res, err := index.Search(q.Query, k, discovery.Visibility{})
		if err != nil {
			return 0, fmt.Errorf("query %q: %w", q.Query, err)
		}
		var found []string
		for _, f := range res.Tools {
			found = append(found, f.Name)
		}
		if slices.ContainsFunc(q.Tools, func(t string) bool { return slices.Contains(found, t) }) {
			hits++
		} else if verbose {
			fmt.Fprintf(os.Stderr, "miss: %q wants %v, found %v\n", q.Query, q.Tools, found)
		}
	}
	return float64(hits) / float64(len(queries)), nil
}

// renamedCopies are n tools: the corpus, then copies of it under new names.
func renamedCopies(c *corpus, n int) *corpus {
	out := &corpus{entries: make(map[string]json.RawMessage, n)}
	for copyNo := 0; len(out.names) < n; copyNo++ {
		for _, name := range c.names {
			if len(out.names) == n {
				break
			}
			served := name
			if copyNo > 0 {
				served = fmt.Sprintf("%s_%d", name, copyNo+1)
			}
			entry, _ := listing.RemoteEntry(served, c.entries[name])
			out.names = append(out.names, served)
			out.entries[served] = entry
		}
	}
	return out
}

// searchP50 is the median in-process search over c, the queries taken in turn.
func searchP50(c *corpus, queries []benchQuery, rounds int) (time.Duration, error) {
	start := time.Now()
	index, err := discovery.Build(c.entries, nil)
	if err != nil {
		return 0, err
	}
	// What a (re)load pays: on stderr, beside the one line the benchmark prints.
	fmt.Fprintf(os.Stderr, "discovery: index of %d tools built in %s\n", len(c.names), time.Since(start).Round(time.Millisecond))
	defer index.Close()
	took := make([]time.Duration, 0, rounds)
	for i := range rounds {
		q := queries[i%len(queries)]
		start := time.Now()
		if _, err := index.Search(q.Query, 5, discovery.Visibility{}); err != nil {
			return 0, err
		}
		took = append(took, time.Since(start))
	}
	return median(took), nil
}

// adapterConfig serves c's tools as an adapter would (each answering "ok"), stateless,
// in Search mode or not. A definition the adapter would refuse is left out.
func adapterConfig(c *corpus, search bool) *adapterconfig.Config {
	cfg := &adapterconfig.Config{
		Server:    adapterconfig.ServerInfo{Name: "discoverybench", Version: "0"},
		Transport: adapterconfig.TransportStreamableHTTP,
		Stateless: true,
	}
	for _, name := range c.names {
		var t adapterconfig.Tool
		if json.Unmarshal(c.entries[name], &t) != nil {
			continue
		}
		t.Template = &adapterconfig.TemplateBackend{Text: "ok"}
		if len(t.InputSchema) == 0 {
			t.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		if adapterconfig.CheckTool(&t) != nil {
			continue
		}
		cfg.Tools = append(cfg.Tools, t)
	}
	if search {
		cfg.Discovery = &adapterconfig.Discovery{Mode: adapterconfig.DiscoverySearch, FindToolName: "find_tools", CallToolName: "call_tool", DefaultLimit: 5, MaxLimit: 20}
	}
	return cfg
}

// listBytesRatio is the size of a real adapter's tools/list in Search mode against All
// mode, over the corpus.
func listBytesRatio(c *corpus) (float64, error) {
	size := func(search bool) (int, error) {
		var n int
		err := withAdapter(adapterConfig(c, search), func(ctx context.Context, cl *client.Client) error {
			res, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				return err
			}
			raw, err := json.Marshal(res)
			n = len(raw)
			return err
		})
		return n, err
	}
	all, err := size(false)
	if err != nil {
		return 0, err
	}
	search, err := size(true)
	if err != nil {
		return 0, err
	}
	return float64(search) / float64(all), nil
}

// httpFindP50 is the median find_tools call over HTTP to an adapter serving c.
func httpFindP50(c *corpus, queries []benchQuery, rounds int) (time.Duration, error) {
	var p50 time.Duration
	err := withAdapter(adapterConfig(c, true), func(ctx context.Context, cl *client.Client) error {
		took := make([]time.Duration, 0, rounds)
		for i := range rounds {
			req := mcp.CallToolRequest{}
			req.Params.Name = "find_tools"
			req.Params.Arguments = map[string]any{"query": queries[i%len(queries)].Query}
			start := time.Now()
			res, err := cl.CallTool(ctx, req)
			if err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("find_tools: %v", res.Content)
			}
			took = append(took, time.Since(start))
		}
		p50 = median(took)
		return nil
	})
	return p50, err
}

// withAdapter runs fn with a client of a real adapter serving cfg on loopback.
func withAdapter(cfg *adapterconfig.Config, fn func(context.Context, *client.Client) error) error {
	srv, err := adapter.NewServer(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			fmt.Fprintln(os.Stderr, "discoverybench: the adapter stopped:", err)
		}
	}()
	tr, err := transport.NewStreamableHTTP("http://" + ln.Addr().String() + adapterconfig.PathMCP)
	if err != nil {
		return err
	}
	cl := client.NewClient(tr)
	if err := cl.Start(ctx); err != nil {
		return err
	}
	defer cl.Close()
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "discoverybench", Version: "0"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		return err
	}
	return fn(ctx, cl)
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
