// Package render turns a SkillServer into the adapter config both workload runtimes
// serve. There is one renderer so that the kubernetes and local runtimes cannot differ.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/utils/ptr"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// MemoryMountPath is where the kubernetes runtime mounts the memory claim.
const MemoryMountPath = "/var/lib/cantus/memory"

// emptyObjectSchema is served for a skill that declares no inputSchema.
var emptyObjectSchema = json.RawMessage(`{"type":"object"}`)

// adapterConfig renders the adapter config of a SkillServer.
func adapterConfig(ss *cantusv1alpha1.SkillServer) *adapterconfig.Config {
	cfg := &adapterconfig.Config{
		Server:    serverInfo(ss),
		Transport: string(ss.Spec.TransportOrDefault()),
		Port:      ss.Spec.PortOrDefault(),
		Stateless: ss.Spec.StatelessOrDefault(),
		Tools:     make([]adapterconfig.Tool, 0, len(ss.Spec.Skills)),
	}
	if replicas := ptr.Deref(ss.Spec.Replicas, cantusv1alpha1.DefaultReplicas); replicas > 1 {
		// Unset for one, so that the configs of single-replica servers stay as they were.
		cfg.Replicas = replicas
	}
	for i := range ss.Spec.Skills {
		cfg.Tools = append(cfg.Tools, tool(&ss.Spec.Skills[i]))
	}
	if ss.Spec.Memory != nil {
		cfg.Memory = memoryConfig(ss.Spec.Memory)
	}
	return cfg
}

func memoryConfig(in *cantusv1alpha1.MemorySpec) *adapterconfig.MemoryConfig {
	return &adapterconfig.MemoryConfig{
		Root:            MemoryMountPath,
		ToolName:        in.ToolNameOrDefault(),
		AllowedCommands: commands(in.AllowedCommands),
		ConfirmCommands: commands(in.ConfirmCommands),
		ReadOnly:        in.ReadOnly,
		MaxFileBytes:    in.MaxFileBytesOrDefault(),
		MaxTotalBytes:   in.MaxTotalBytesOrDefault(),
		TrashRetention:  adapterconfig.Duration{Duration: in.TrashRetentionOrDefault()},
	}
}

// commands keeps nil apart from empty: no confirmCommands means the default set, an
// empty list means none.
func commands(in []cantusv1alpha1.MemoryCommand) []string {
	if in == nil {
		return nil
	}
	out := make([]string, 0, len(in))
	for _, c := range in {
		out = append(out, string(c))
	}
	return out
}

// hashOf identifies a rendered config; a change of hash rolls the adapter pods.
func hashOf(cfg *adapterconfig.Config) (string, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encode adapter config: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16], nil
}

// PortOf returns the port the server listens on.
func PortOf(ss *cantusv1alpha1.SkillServer) int32 { return ss.Spec.PortOrDefault() }

// EndpointPath is the path MCP clients connect to for the server's transport.
func EndpointPath(ss *cantusv1alpha1.SkillServer) string {
	if ss.Spec.TransportOrDefault() == cantusv1alpha1.TransportSSE {
		return adapterconfig.PathSSE
	}
	return adapterconfig.PathMCP
}

func serverInfo(ss *cantusv1alpha1.SkillServer) adapterconfig.ServerInfo {
	info := adapterconfig.ServerInfo{
		Name:         ss.Spec.ServerInfo.Name,
		Version:      ss.Spec.ServerInfo.VersionOrDefault(),
		Instructions: ss.Spec.ServerInfo.Instructions,
	}
	if info.Name == "" {
		info.Name = ss.Name
	}
	return info
}

func tool(skill *cantusv1alpha1.Skill) adapterconfig.Tool {
	t := adapterconfig.Tool{
		Name:        skill.Name,
		Description: skill.Description,
		InputSchema: emptyObjectSchema,
		Annotations: annotations(skill.Annotations),
	}
	if skill.InputSchema != nil && len(skill.InputSchema.Raw) > 0 {
		t.InputSchema = json.RawMessage(skill.InputSchema.Raw)
	}
	t.Template, t.HTTP = backend(skill.Template, skill.HTTP)
	return t
}

// backend renders the backend of a tool or resource template, which validation allows
// one of: the template when set, the HTTP backend otherwise.
func backend(tmpl *cantusv1alpha1.TemplateBackend, hb *cantusv1alpha1.HTTPBackend) (*adapterconfig.TemplateBackend, *adapterconfig.HTTPBackend) {
	switch {
	case tmpl != nil:
		return &adapterconfig.TemplateBackend{Text: tmpl.Text}, nil
	case hb != nil:
		return nil, httpBackend(hb)
	}
	return nil, nil
}

func httpBackend(in *cantusv1alpha1.HTTPBackend) *adapterconfig.HTTPBackend {
	return &adapterconfig.HTTPBackend{
		URL:              in.URL,
		Timeout:          adapterconfig.Duration{Duration: in.TimeoutOrDefault()},
		MaxResponseBytes: in.MaxResponseBytesOrDefault(),
	}
}

func annotations(in *cantusv1alpha1.ToolAnnotations) *adapterconfig.ToolAnnotations {
	if in == nil {
		return nil
	}
	return &adapterconfig.ToolAnnotations{
		Title:           in.Title,
		ReadOnlyHint:    in.ReadOnlyHint,
		DestructiveHint: in.DestructiveHint,
		IdempotentHint:  in.IdempotentHint,
		OpenWorldHint:   in.OpenWorldHint,
	}
}

// discoveryConfig is spec.discovery as the adapter reads it; nil in All mode, so that
// a server listing every tool renders the config it rendered before discovery existed.
func discoveryConfig(d *cantusv1alpha1.DiscoverySpec) *adapterconfig.Discovery {
	if d.ModeOrDefault() != cantusv1alpha1.DiscoverySearch {
		return nil
	}
	return &adapterconfig.Discovery{
		Mode:         adapterconfig.DiscoverySearch,
		Pinned:       slices.Clone(d.Pinned),
		FindToolName: d.FindToolNameOrDefault(),
		CallToolName: d.CallToolNameOrDefault(),
		DefaultLimit: int(d.LimitOrDefault()),
		MaxLimit:     int(d.MaxLimitOrDefault()),
	}
}
