package v1alpha1

import (
	"fmt"
	"time"
)

// Bounds of the duration fields. The CEL rules on the fields say the same; these judge
// objects stored before the rules existed.
const (
	MinRefreshInterval = 10 * time.Second
	MaxRefreshInterval = 24 * time.Hour
	MinImportTimeout   = time.Second
	MaxImportTimeout   = 5 * time.Minute
	MinHTTPTimeout     = time.Millisecond
	MaxHTTPTimeout     = 10 * time.Minute
	MinTrashRetention  = time.Minute
	MaxTrashRetention  = 8760 * time.Hour
)

// Problems lists what in the spec can never work, each naming the field and the fix.
// The API server refuses these at apply time; an object stored before that validation
// existed is reported Stalled instead of breaking the operator.
func (s *RemoteToolImportSpec) Problems() []string {
	var out []string
	out = appendBounded(out, "spec.refreshInterval", s.RefreshInterval, MinRefreshInterval, MaxRefreshInterval)
	out = appendBounded(out, "spec.timeout", s.Timeout, MinImportTimeout, MaxImportTimeout)
	return append(out, s.callerCredentialsProblems()...)
}

// callerCredentialsProblems: the cache bound must be a duration in range. (The caller's
// header may be one of spec.headers: the probe sends the service identity in it, and a
// gateway's calls the caller's credential instead.)
func (s *RemoteToolImportSpec) callerCredentialsProblems() []string {
	cc := s.CallerCredentials
	if cc == nil {
		return nil
	}
	var out []string
	if te := cc.TokenExchange; te != nil {
		out = appendBounded(out, "spec.callerCredentials.tokenExchange.maxCacheTTL", te.MaxCacheTTL, MinExchangeMaxCacheTTL, MaxExchangeMaxCacheTTL)
	}
	return out
}

// Problems lists what in the spec can never work, each naming the field and the fix.
func (s *SkillServerSpec) Problems() []string {
	var out []string
	for i := range s.Skills {
		if h := s.Skills[i].HTTP; h != nil {
			out = appendBounded(out, fmt.Sprintf("spec.skills[%d].http.timeout", i), h.Timeout, MinHTTPTimeout, MaxHTTPTimeout)
		}
	}
	if m := s.Memory; m != nil {
		out = appendBounded(out, "spec.memory.trashRetention", m.TrashRetention, MinTrashRetention, MaxTrashRetention)
		if m.Size != nil {
			if _, err := m.Size.Parse(); err != nil {
				out = append(out, fmt.Sprintf("spec.memory.size: %v", err))
			}
		}
	}
	return out
}

func appendBounded(out []string, field string, d *Duration, lo, hi time.Duration) []string {
	if d == nil {
		return out
	}
	if _, err := d.Bounded(lo, hi); err != nil {
		return append(out, fmt.Sprintf("%s: %v", field, err))
	}
	return out
}
