package stdioproxy

import "sync"

// TailBuffer keeps the last bytes written to it, at most its limit: a process's recent
// output, for an error message, whatever the process wrote before. Safe for concurrent
// use.
type TailBuffer struct {
	mu    sync.Mutex
	buf   []byte
	limit int
}

// NewTailBuffer keeps the last limit bytes.
func NewTailBuffer(limit int) *TailBuffer { return &TailBuffer{limit: limit} }

func (b *TailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// String is what the buffer holds.
func (b *TailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
