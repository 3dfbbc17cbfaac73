package adapterconfig

import "time"

// The adapter's limits when the config's limits leave them unset, and the pools whose
// share one caller may hold. They are the API's defaults too (SkillServer spec.limits,
// whose documentation names the pool sizes); internal/render's
// TestAdapterLimitsAreTheAPIDefaults keeps the two from drifting, since the adapter
// cannot import the API.
const (
	// DefaultConcurrentCalls bounds the tool calls that run at once; more wait.
	DefaultConcurrentCalls = 64
	// DefaultQueueLength bounds the calls that wait for a slot; more are refused at once.
	DefaultQueueLength = 64
	// DefaultQueueWait is how long a call waits for a slot before it is refused.
	DefaultQueueWait = 10 * time.Second
	// DefaultCallerShare is the part of each pool below one caller may hold.
	DefaultCallerShare = 0.25

	// MaxListenStreams bounds the subscriptions/listen streams one pod keeps open.
	MaxListenStreams = 1024
	// MaxRelayWaitingCalls bounds a gateway's calls waiting for their callers' answers.
	MaxRelayWaitingCalls = 256
	// MaxRemoteSubscriptions bounds a gateway's subscriptions at its remotes.
	MaxRemoteSubscriptions = 1024
)
