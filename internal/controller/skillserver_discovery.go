package controller

import (
	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/adapterconfig"
)

// setDiscovery reports the discovery mode and, in Search mode, what the adapter's
// index holds: counted from the rendered config, which is what the adapter indexes
// (image skills that break a rule are left out there, so the count is an upper bound).
func setDiscovery(ss *cantusv1alpha1.SkillServer, cfg *adapterconfig.Config) {
	if ss.Spec.Discovery == nil {
		ss.Status.Discovery = nil
		return
	}
	st := &cantusv1alpha1.DiscoveryStatus{Mode: ss.Spec.Discovery.ModeOrDefault()}
	if cfg != nil && cfg.Searching() {
		tools := len(cfg.Tools)
		if cfg.Memory != nil {
			tools++
		}
		st.IndexedTools = int32(tools)
		st.IndexedSkills = int32(len(cfg.AgentSkills) + len(cfg.ImageSkills))
	}
	ss.Status.Discovery = st
}

// listedToolNames are the names the pods list to a caller that may call every tool:
// every tool served, or in Search mode the pinned ones and the meta-tools. (The index
// behind the find meta-tool is not checked here yet.)
func listedToolNames(ss *cantusv1alpha1.SkillServer, cfg *adapterconfig.Config) []string {
	names := toolNames(ss.Status.Tools)
	if cfg == nil || !cfg.Searching() {
		return names
	}
	listed := []string{cfg.Discovery.FindToolName, cfg.Discovery.CallToolName}
	for _, name := range names {
		if cfg.Discovery.Pins(name) {
			listed = append(listed, name)
		}
	}
	return listed
}
