package clip

import "testing"

func TestLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"short text stays", "short", 10, "short"},
		{"white space folds to one line", " two\nlines\t here ", 20, "two lines here"},
		{"long text is cut and marked", "abcdefghij", 4, "abcd…"},
		{"no cut inside a rune", "ééé", 3, "é…"},
		{"exactly the limit stays", "abcd", 4, "abcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line(tc.in, tc.limit); got != tc.want {
				t.Errorf("Line(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
			}
		})
	}
}
