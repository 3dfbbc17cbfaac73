package controller

import (
	"slices"

	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// statusEras are the eras a successful probe found the remote serving, as
// status.eras shows them: the ones mcpclient speaks, newest first.
func statusEras(res *mcpclient.Result) []string {
	var out []string
	for _, era := range mcpclient.Eras() {
		if slices.Contains(res.Eras, era) {
			out = append(out, era)
		}
	}
	return out
}
