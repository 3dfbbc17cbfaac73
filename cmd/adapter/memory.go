package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
	"github.com/cantus-dev/cantus-operator/internal/memory"
)

// memoryCommand lets an operator see and undo what an agent did to the memory files:
//
//	adapter memory trash   --config PATH            list trashed files (JSON lines)
//	adapter memory journal --config PATH            print the mutation journal (JSON lines)
//	adapter memory restore --config PATH TRASH_ID   bring a trashed file back
//
// In a pod: kubectl exec deploy/NAME -- /adapter memory trash --config /etc/cantus/adapterconfig.json
func memoryCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "adapter memory: name a subcommand: trash, journal or restore")
		return exitUsage
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("adapter memory "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the adapter config whose memory tool to open")
	root := fs.String("root", "", "the memory folder, instead of the one in --config")
	if err := fs.Parse(rest); err != nil {
		return exitUsage
	}
	store, err := openMemoryFor(*configPath, *root)
	if err != nil {
		fmt.Fprintln(stderr, "adapter memory:", err)
		return exitError
	}
	defer store.Close()

	switch sub {
	case "trash":
		entries, err := store.Trash()
		return printJSONLines(stdout, stderr, entries, err)
	case "journal":
		report, err := store.ReadJournal()
		for _, skipped := range report.Skipped {
			fmt.Fprintf(stderr, "adapter memory journal: line %d is torn (a crash mid-append) and was skipped: %v\n", skipped.Line, skipped.Err)
		}
		return printJSONLines(stdout, stderr, report.Entries, err)
	case "restore":
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "adapter memory restore: give exactly one trash id (see `adapter memory trash`)")
			return exitUsage
		}
		path, err := store.Restore(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, "adapter memory restore:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "restored %s\n", path)
		return exitOK
	default:
		fmt.Fprintf(stderr, "adapter memory: unknown subcommand %q: use trash, journal or restore\n", sub)
		return exitUsage
	}
}

func openMemoryFor(configPath, root string) (*memory.Store, error) {
	if configPath == "" && root == "" {
		return nil, errors.New("give --config (the adapter config) or --root (the memory folder)")
	}
	cfg := memory.Config{Root: root}
	if configPath != "" {
		adapterCfg, err := adapterconfig.Load(configPath)
		if err != nil {
			return nil, err
		}
		if adapterCfg.Memory == nil {
			return nil, fmt.Errorf("%s has no memory tool", configPath)
		}
		cfg = memory.ConfigFrom(adapterCfg.Memory)
		if root != "" {
			cfg.Root = root
		}
	}
	return memory.Open(cfg)
}

func printJSONLines[T any](stdout, stderr io.Writer, entries []T, err error) int {
	if err != nil {
		fmt.Fprintln(stderr, "adapter memory:", err)
		return exitError
	}
	enc := json.NewEncoder(stdout)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			fmt.Fprintln(stderr, "adapter memory:", err)
			return exitError
		}
	}
	return exitOK
}
