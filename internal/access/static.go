package access

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// rereadEvery bounds how often the token file is read again: a rotated Secret is
// enforced within about this long plus the kubelet's own sync delay.
const rereadEvery = time.Second

// staticTokens are the shared bearer tokens: from a file with one per line (re-read as
// it changes, so that a rotated Secret needs no restart and old and new tokens can
// overlap), or given in memory.
type staticTokens struct {
	path string

	mu       sync.Mutex
	digests  [][sha256.Size]byte
	content  []byte
	lastRead time.Time
}

func newStaticTokens(path string, inline []string) (*staticTokens, error) {
	s := &staticTokens{path: path}
	if path == "" {
		s.digests = digestsOf(inline)
		if len(s.digests) == 0 {
			return nil, fmt.Errorf("bearer token is empty: pass a non-empty token or leave auth off")
		}
		return s, nil
	}
	if err := s.read(time.Now()); err != nil {
		return nil, err
	}
	return s, nil
}

// read loads the file; a file that cannot be read or holds no token keeps the tokens
// read before (at start-up it is an error), so that a half-made Secret locks no one out
// that was let in a second ago, and never lets anyone in.
func (s *staticTokens) read(now time.Time) error {
	s.lastRead = now
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("read bearer token file: %w", err)
	}
	if bytes.Equal(data, s.content) {
		return nil
	}
	digests := digestsOf(strings.Split(string(data), "\n"))
	if len(digests) == 0 {
		return fmt.Errorf("bearer token file %s is empty: put the tokens in it, one per line", s.path)
	}
	s.content, s.digests = data, digests
	return nil
}

func digestsOf(tokens []string) [][sha256.Size]byte {
	var out [][sha256.Size]byte
	for _, t := range tokens {
		for line := range strings.SplitSeq(t, "\n") {
			if line = strings.TrimSpace(line); line != "" {
				out = append(out, sha256.Sum256([]byte(line)))
			}
		}
	}
	return out
}

// accepts says whether token is one of the tokens. Digests are compared in constant
// time, so the comparison tells nothing about a token's length or prefix.
func (s *staticTokens) accepts(token string) bool {
	got := sha256.Sum256([]byte(token))
	s.mu.Lock()
	if now := time.Now(); s.path != "" && now.Sub(s.lastRead) >= rereadEvery {
		_ = s.read(now) // on failure the last tokens stay; start-up reported the file's problems
	}
	digests := s.digests
	s.mu.Unlock()
	match := 0
	for i := range digests {
		match |= subtle.ConstantTimeCompare(got[:], digests[i][:])
	}
	return match == 1
}
