package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"slices"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/testkit"
	"github.com/cantus-dev/cantus-operator/test/peers"
)

const (
	// saIssuer and saAudience are those of the stand-in cluster's service-account tokens.
	saIssuer   = "https://kubernetes.default.svc"
	saAudience = "cantus-e2e"

	forecastTool = "get_weather_forecast"
	// stationTool matches a weather task as well as forecastTool does, and only the ops
	// service account may use it.
	stationTool = "admin_weather_station"
	pinnedTool  = "get_current_time"
)

// searchTools are a gateway's worth of unrelated tools (template tools, so that a call's
// output is known), one of which a weather task needs.
func searchTools() []configTool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	schema := func(props map[string]any, required ...string) json.RawMessage {
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		b, _ := json.Marshal(s)
		return b
	}
	tool := func(name, desc string, props map[string]any, required ...string) configTool {
		return configTool{Name: name, Description: desc, InputSchema: schema(props, required...), Template: &templateSpec{Text: name + " done"}}
	}
	forecast := tool(forecastTool, "Get the weather forecast (temperature, rain, wind) for a city on a given day.",
		map[string]any{"city": str("City name."), "day": str("today, tomorrow, or a date (YYYY-MM-DD).")}, "city", "day")
	forecast.Template = &templateSpec{Text: "Forecast for {{.city}} ({{.day}}): light rain, 14°C"}
	return []configTool{
		forecast,
		tool(stationTool, "Reconfigure the weather station of a city: forecast model, sensors and calibration.",
			map[string]any{"city": str("City name."), "model": str("Forecast model.")}, "city"),
		tool(pinnedTool, "Current date and time in a time zone.", map[string]any{"zone": str("IANA time zone.")}),
		tool("convert_currency", "Convert an amount of money between currencies at today's exchange rate.",
			map[string]any{"amount": map[string]any{"type": "number"}, "from": str("ISO code."), "to": str("ISO code.")}, "amount", "from", "to"),
		tool("translate_text", "Translate text from one language to another.", map[string]any{"text": str("Text."), "to": str("Target language.")}, "text", "to"),
		tool("send_email", "Send an email to a recipient with a subject and a body.",
			map[string]any{"to": str("Address."), "subject": str("Subject."), "body": str("Body.")}, "to", "subject"),
		tool("create_calendar_event", "Create a calendar event with a title, a start time and attendees.",
			map[string]any{"title": str("Title."), "start": str("RFC 3339 time.")}, "title", "start"),
		tool("search_flights", "Search flights between two airports on a date.",
			map[string]any{"from": str("IATA code."), "to": str("IATA code."), "date": str("Date.")}, "from", "to"),
		tool("book_hotel", "Book a hotel room in a city from a check-in to a check-out date.",
			map[string]any{"city": str("City."), "checkIn": str("Date."), "checkOut": str("Date.")}, "city"),
		tool("get_stock_quote", "Latest stock price quote for a ticker symbol.", map[string]any{"ticker": str("Symbol.")}, "ticker"),
		tool("query_database", "Run a read-only SQL query against the analytics database.", map[string]any{"sql": str("Query.")}, "sql"),
		tool("create_github_issue", "Open an issue in a GitHub repository with a title and a body.",
			map[string]any{"repo": str("owner/name."), "title": str("Title.")}, "repo", "title"),
		tool("read_file", "Read a text file from the workspace.", map[string]any{"path": str("Path.")}, "path"),
		tool("summarize_document", "Summarize a long document into a few bullet points.", map[string]any{"text": str("Document.")}, "text"),
		tool("geocode_address", "Turn a street address into latitude and longitude.", map[string]any{"address": str("Address.")}, "address"),
		tool("get_air_quality", "Air quality index and pollutants measured now in a city.", map[string]any{"city": str("City.")}, "city"),
		tool("list_restaurants", "Find restaurants near a place by cuisine.", map[string]any{"near": str("Place."), "cuisine": str("Cuisine.")}, "near"),
		tool("track_package", "Track a parcel shipment by its tracking number.", map[string]any{"number": str("Tracking number.")}, "number"),
		tool("set_reminder", "Set a reminder that notifies the user at a given time.", map[string]any{"at": str("Time."), "text": str("Text.")}, "at"),
		tool("calculate_route", "Driving or walking directions and travel time between two places.",
			map[string]any{"from": str("Origin."), "to": str("Destination.")}, "from", "to"),
		tool("get_news_headlines", "Top news headlines for a topic or a country.", map[string]any{"topic": str("Topic.")}),
	}
}

// saSigner stands in for the cluster's service-account signing key.
type saSigner struct {
	key    *rsa.PrivateKey
	signer jose.Signer
}

func newSASigner(t *testing.T) *saSigner {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "e2e"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &saSigner{key: key, signer: signer}
}

// jwks is the key set the operator would copy into the config.
func (s *saSigner) jwks(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &s.key.PublicKey, KeyID: "e2e", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// token is a service-account token of ns/name, as TokenRequest makes it.
func (s *saSigner) token(t *testing.T, ns, name string) string {
	t.Helper()
	raw, err := jwt.Signed(s.signer).Claims(jwt.Claims{
		Issuer: saIssuer, Subject: "system:serviceaccount:" + ns + ":" + name, Audience: jwt.Audience{saAudience},
		Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour)), IssuedAt: jwt.NewNumericDate(time.Now()),
	}).Claims(map[string]any{"kubernetes.io": map[string]any{"namespace": ns, "serviceaccount": map[string]any{"name": name}}}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestDiscoverySearchWithLangChainAgent: LangChain.js, through its MCP adapters, loads
// the tools of a stateless adapter in Search mode (the pin and the two meta-tools only),
// finds the tool a task needs with find_tools and calls it with call_tool, as an agent
// would (the steps a model would choose are scripted: no model is reachable). A tool
// the caller's rules forbid is never found, though it matches the task; a caller the
// rules allow finds it with the same queries.
func TestDiscoverySearchWithLangChainAgent(t *testing.T) {
	ctx := testkit.Context(t, testTimeout)
	sa := newSASigner(t)
	tools := searchTools()
	var everyoneElse []string
	for _, tool := range tools {
		if tool.Name != stationTool {
			everyoneElse = append(everyoneElse, tool.Name)
		}
	}
	cfg := map[string]any{
		"server":    map[string]any{"name": serverName, "version": serverVersion, "instructions": instructions},
		"transport": adapterconfig.TransportStreamableHTTP,
		"port":      0,
		"stateless": true,
		"tools":     tools,
		"auth": map[string]any{
			"issuers": []map[string]any{{"kind": adapterconfig.IssuerServiceAccount, "url": saIssuer,
				"audiences": []string{saAudience}, "jwks": sa.jwks(t)}},
			"authorization": map[string]any{"rules": []map[string]any{
				{"tools": everyoneElse, "serviceAccounts": []string{"agents/*"}},
				{"tools": []string{stationTool}, "serviceAccounts": []string{"agents/ops"}},
			}},
		},
		"discovery": map[string]any{"mode": adapterconfig.DiscoverySearch, "pinned": []string{pinnedTool},
			"findToolName": "find_tools", "callToolName": "call_tool", "defaultLimit": 5, "maxLimit": 20},
	}
	url := peers.StartAdapter(t, ctx, writeCheckedConfig(t, cfg)) + adapterconfig.PathMCP

	const task = "I need to know the weather forecast for Paris tomorrow"
	probes := []string{"reconfigure the weather station sensors and calibration", stationTool}
	agent := func(serviceAccount string) peers.LangChainAgentOutput {
		start := time.Now()
		out := peers.LangChainAgent(t, ctx, peers.LangChainAgentOptions{
			URL: url, Headers: map[string]string{"Authorization": "Bearer " + sa.token(t, "agents", serviceAccount)},
			ExpectTools: []string{pinnedTool, "find_tools", "call_tool"},
			Task:        task, Args: map[string]any{"city": "Paris", "day": "tomorrow"},
			Limit: 5, Probes: probes,
		})
		t.Logf("agents/%s: found %v for the task in %s", serviceAccount, out.FoundNames(), time.Since(start).Round(time.Millisecond))
		return out
	}

	assistant := agent("assistant")
	if i := slices.Index(assistant.FoundNames(), forecastTool); i < 0 || i > 2 {
		t.Errorf("find_tools answered %v for %q: want %s in the top 3", assistant.FoundNames(), task, forecastTool)
	}
	if assistant.Chosen != forecastTool {
		t.Fatalf("the agent chose %q, the top result: want %s", assistant.Chosen, forecastTool)
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(assistant.ChosenSchema, &schema); err != nil || !slices.Equal(schema.Required, []string{"city", "day"}) {
		t.Errorf("find_tools gave the chosen tool the inputSchema %s, want its full definition", assistant.ChosenSchema)
	}
	if want := "Forecast for Paris (tomorrow): light rain, 14°C"; assistant.Result != want {
		t.Errorf("call_tool %s answered %q, want the tool's output %q", forecastTool, assistant.Result, want)
	}
	if slices.Contains(assistant.FoundNames(), stationTool) {
		t.Errorf("agents/assistant found %s, which its rules forbid: %v", stationTool, assistant.FoundNames())
	}
	for _, q := range probes {
		if slices.Contains(assistant.Probes[q], stationTool) {
			t.Errorf("agents/assistant found %s with %q, which its rules forbid: %v", stationTool, q, assistant.Probes[q])
		}
	}

	// The same queries find the tool for a caller that may use it, so its absence above
	// is the rules' doing, not the ranking's.
	ops := agent("ops")
	if !slices.Contains(ops.FoundNames(), stationTool) {
		t.Errorf("agents/ops, whom the rules allow %s, did not find it for %q: %v", stationTool, task, ops.FoundNames())
	}
	for _, q := range probes {
		if !slices.Contains(ops.Probes[q], stationTool) {
			t.Errorf("agents/ops, whom the rules allow %s, did not find it with %q: %v", stationTool, q, ops.Probes[q])
		}
	}
}
