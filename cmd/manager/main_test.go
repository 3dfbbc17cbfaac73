package main

import (
	"slices"
	"testing"
)

func TestParseNamespaces(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "team-a", want: []string{"team-a"}},
		{in: " team-a, team-b ,,team-a", want: []string{"team-a", "team-b"}},
		{in: "team-a,Team_B", wantErr: true},
		{in: "team-a,../x", wantErr: true},
	} {
		got, err := parseNamespaces(tc.in)
		if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
			t.Errorf("parseNamespaces(%q) = %v, %v; want %v (error %t)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
