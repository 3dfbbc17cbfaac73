package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

const probeUsage = `usage: adapter probe [--transport streamable-http|sse] [--header 'Name: value']... [--timeout 10s]
                    [--ca-file PEM] [--max-message-bytes N] [--max-tools N] URL

Runs the MCP handshake the operator runs against a remote server (initialize, then
tools/list through every page, and prompts/list, resources/list and
resources/templates/list when the server announces prompts or resources) and prints what it learnt as JSON to stdout (exit 0).
On failure it prints the error, starting "mcp_handshake_failed: ", and its reason to
stderr (exit 1). Flags may come before or after the URL.
`

// probeOutput is the JSON the probe command prints.
type probeOutput struct {
	*mcpclient.Result
	// Digest is the catalog digest a RemoteToolImport without filters would show.
	Digest string `json:"digest"`
}

// headerFlags collects repeated --header 'Name: value' flags.
type headerFlags map[string]string

func (h headerFlags) String() string {
	// Values may be secrets: only the names are ever printed.
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	return strings.Join(names, ",")
}

func (h headerFlags) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return errors.New(`want 'Name: value'`)
	}
	h[name] = strings.TrimSpace(value)
	return nil
}

// probeCommand is `adapter probe`.
func probeCommand(args []string, stdout, stderr io.Writer) int {
	headers := headerFlags{}
	opts := mcpclient.Options{}
	var caFile string
	fs := flag.NewFlagSet("adapter probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, probeUsage) }
	fs.StringVar(&opts.Transport, "transport", mcpclient.TransportStreamableHTTP, "streamable-http or sse")
	fs.Var(headers, "header", "'Name: value' sent with every request (repeatable)")
	fs.DurationVar(&opts.Timeout, "timeout", mcpclient.DefaultTimeout, "bound of the whole handshake")
	fs.StringVar(&caFile, "ca-file", "", "PEM bundle of the only CAs TLS trusts")
	fs.Int64Var(&opts.MaxMessageBytes, "max-message-bytes", mcpclient.DefaultMaxMessageBytes, "largest response body accepted")
	fs.IntVar(&opts.MaxTools, "max-tools", mcpclient.DefaultMaxTools, "most tools accepted over all pages")

	// Parse flags before and after the URL (the conformance suite appends the URL).
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK
			}
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) != 1 {
		fmt.Fprintf(stderr, "adapter probe: want exactly one URL, got %d arguments\n", len(positional))
		fmt.Fprint(stderr, probeUsage)
		return exitUsage
	}
	if opts.Timeout <= 0 {
		fmt.Fprintf(stderr, "adapter probe: --timeout %s must be greater than 0\n", opts.Timeout)
		return exitUsage
	}
	opts.URL = positional[0]
	opts.Headers = headers
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			fmt.Fprintf(stderr, "adapter probe: --ca-file: %v\n", err)
			return exitUsage
		}
		opts.CABundle = pem
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	start := time.Now()
	res, err := mcpclient.Probe(ctx, opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		fmt.Fprintf(stderr, "reason: %s (after %s)\n", mcpclient.ReasonOf(err), time.Since(start).Round(time.Millisecond))
		return exitError
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(probeOutput{Result: res, Digest: mcpclient.CatalogDigest(res.Tools, res.Content)}); err != nil {
		fmt.Fprintf(stderr, "adapter probe: write the result: %v\n", err)
		return exitError
	}
	return exitOK
}
