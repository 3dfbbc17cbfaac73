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

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short\nline", 64, "short\nline"},
		{"abcdefgh", 6, "abc…"},
		{"aé€😀", 8, "aé…"}, // 1+2+3+4 bytes; the cut falls inside € and is dropped with it
		{"abcdef", 2, "…"},
	} {
		if got := Bytes(c.in, c.limit); got != c.want {
			t.Errorf("Bytes(%q, %d) = %q, want %q", c.in, c.limit, got, c.want)
		}
		if len(c.in) > c.limit && len(Bytes(c.in, c.limit)) > max(c.limit, len("…")) {
			t.Errorf("Bytes(%q, %d) is %d bytes", c.in, c.limit, len(Bytes(c.in, c.limit)))
		}
	}
}

func TestCharacters(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"héllo", 5, "héllo"},
		{"héllo wörld", 6, "héllo…"},
		{"😀😀😀", 2, "😀…"},
	} {
		if got := Characters(c.in, c.n); got != c.want {
			t.Errorf("Characters(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
