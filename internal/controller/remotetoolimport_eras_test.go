package controller

import (
	"slices"
	"testing"
	"time"

	cantusv1alpha1 "github.com/cantus-dev/cantus-operator/api/v1alpha1"
	"github.com/cantus-dev/cantus-operator/internal/mcpclient"
)

// A successful handshake records the eras the probe found in status.eras (the ERAS
// column), newest first and only those the client speaks.
func TestHandshakeSucceeded_RecordsTheErasOfTheProbe(t *testing.T) {
	imp := &cantusv1alpha1.RemoteToolImport{}
	res := &mcpclient.Result{Eras: []string{mcpclient.EraLegacy, "1999-01-01", mcpclient.EraModern}}
	setHandshakeSucceeded(imp, res, nil, time.Now())
	if !slices.Equal(imp.Status.Eras, []string{mcpclient.EraModern, mcpclient.EraLegacy}) {
		t.Errorf("status.eras %v, want 2026-07-28 and 2025-11-25", imp.Status.Eras)
	}
	setHandshakeSucceeded(imp, &mcpclient.Result{Eras: []string{mcpclient.EraLegacy}}, nil, time.Now())
	if !slices.Equal(imp.Status.Eras, []string{mcpclient.EraLegacy}) {
		t.Errorf("status.eras %v after a 2025-11-25-only probe, want that era", imp.Status.Eras)
	}
}

// A successful handshake records the extensions the remote announced in either era,
// sorted and once each: those of server/discover (the Tasks extension) with those of
// initialize.
func TestHandshakeSucceeded_RecordsTheExtensionsOfBothEras(t *testing.T) {
	imp := &cantusv1alpha1.RemoteToolImport{}
	res := &mcpclient.Result{Eras: mcpclient.Eras(), Extensions: []string{"io.modelcontextprotocol/skills"},
		ModernExtensions: []string{"io.modelcontextprotocol/tasks", "io.modelcontextprotocol/skills"}}
	setHandshakeSucceeded(imp, res, nil, time.Now())
	want := []string{"io.modelcontextprotocol/skills", "io.modelcontextprotocol/tasks"}
	if got := imp.Status.ServerInfo.Extensions; !slices.Equal(got, want) {
		t.Errorf("serverInfo.extensions %v, want %v", got, want)
	}
}
