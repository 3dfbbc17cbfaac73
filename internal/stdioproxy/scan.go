package stdioproxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// topScanner finds the top-level members of one JSON-RPC object as its bytes stream by,
// without holding the object: it records where the values of "id" and "method" start and
// end, keeps a copy of them while they are small, and notes which other top-level keys
// it saw. The bridge uses it both to splice ids in and out of complete lines (so that
// everything else passes through byte for byte) and to find the id of an answer that is
// too large to be kept, so that exactly the request it answers fails.
//
// It does not validate: complete lines are checked with json.Valid first, and the
// oversized ones only need their id.
type topScanner struct {
	pos      int64
	state    scanState
	depth    int
	inString bool
	escape   bool

	key     []byte
	keyLong bool

	current    string // the key whose value is being scanned, "" for uninteresting ones
	valueStart int64
	valueEnd   int64
	capture    []byte
	captureBig bool

	members map[string]member
}

// member is where a top-level value lies in the scanned bytes, and its bytes when it was
// at most maxCapture long.
type member struct {
	start, end int64
	raw        []byte // nil when the value was longer than maxCapture
}

type scanState int

const (
	sStart scanState = iota
	sBeforeKey
	sInKey
	sAfterKey
	sBeforeValue
	sInValue
	sDone
	sBad
)

const (
	maxKeyBytes = 32
	maxCapture  = 256
)

// captured keys: their values are kept (when small) and located.
var capturedKeys = map[string]bool{"id": true, "method": true}

func newTopScanner() *topScanner {
	return &topScanner{members: map[string]member{}}
}

func scanMembers(line []byte) map[string]member {
	s := newTopScanner()
	s.feed(line)
	return s.members
}

func (s *topScanner) feed(p []byte) {
	for i, c := range p {
		pos := s.pos + int64(i)
		if s.inString {
			closing := false
			switch {
			case s.escape:
				s.escape = false
			case c == '\\':
				s.escape = true
			case c == '"':
				s.inString = false
				closing = true
			}
			switch s.state {
			case sInKey:
				if closing {
					s.state = sAfterKey
				} else if len(s.key) < maxKeyBytes {
					s.key = append(s.key, c)
				} else {
					s.keyLong = true
				}
			case sInValue:
				s.keep(c)
				s.valueEnd = pos + 1
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			continue
		}
		switch s.state {
		case sStart:
			if c != '{' {
				s.state = sBad
				continue
			}
			s.depth, s.state = 1, sBeforeKey
		case sBeforeKey:
			switch c {
			case '"':
				s.inString, s.state = true, sInKey
				s.key, s.keyLong = s.key[:0], false
			case '}':
				s.depth, s.state = 0, sDone
			default:
				s.state = sBad
			}
		case sAfterKey:
			if c != ':' {
				s.state = sBad
				continue
			}
			s.state = sBeforeValue
			s.current = ""
			if !s.keyLong {
				s.current = string(s.key)
			}
		case sBeforeValue, sInValue:
			if s.state == sBeforeValue {
				s.state, s.valueStart = sInValue, pos
				s.capture, s.captureBig = s.capture[:0], false
			}
			if s.depth == 1 && (c == ',' || c == '}') {
				s.endValue()
				if c == ',' {
					s.state = sBeforeKey
				} else {
					s.depth, s.state = 0, sDone
				}
				continue
			}
			switch c {
			case '"':
				s.inString = true
			case '{', '[':
				s.depth++
			case '}', ']':
				s.depth--
			}
			s.keep(c)
			s.valueEnd = pos + 1
		case sDone:
			s.state = sBad
		}
	}
	s.pos += int64(len(p))
}

func (s *topScanner) keep(c byte) {
	if !capturedKeys[s.current] || s.captureBig {
		return
	}
	if len(s.capture) >= maxCapture {
		s.captureBig = true
		return
	}
	s.capture = append(s.capture, c)
}

func (s *topScanner) endValue() {
	if s.current == "" {
		return
	}
	m := member{start: s.valueStart, end: s.valueEnd}
	if capturedKeys[s.current] && !s.captureBig {
		m.raw = bytes.Clone(s.capture)
	}
	s.members[s.current] = m
}

// splice returns line with the bytes of m replaced by value.
func splice(line []byte, m member, value []byte) []byte {
	out := make([]byte, 0, len(line)-int(m.end-m.start)+len(value))
	out = append(out, line[:m.start]...)
	out = append(out, value...)
	return append(out, line[m.end:]...)
}

// readMessages reads newline-delimited messages from r until EOF or an error. Each
// complete line of at most max bytes (without its line ending) goes to onLine, which may
// keep it. A longer line is not kept: its bytes stream through a topScanner, and
// onOversized gets the scanner (to find the line's id) and the line's size.
func readMessages(r io.Reader, limit int, onLine func([]byte), onOversized func(s *topScanner, size int64)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	var over *topScanner
	var overSize int64
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case over != nil:
			over.feed(chunk)
			overSize += int64(len(chunk))
		case len(buf)+len(bytes.TrimRight(chunk, "\r\n")) > limit:
			over = newTopScanner()
			over.feed(buf)
			over.feed(chunk)
			overSize = int64(len(buf) + len(chunk))
			buf = nil
		default:
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if over != nil {
			onOversized(over, overSize-int64(trailingNewline(chunk)))
			over, overSize = nil, 0
		} else if line := bytes.TrimRight(buf, "\r\n"); len(bytes.TrimSpace(line)) > 0 {
			onLine(bytes.Clone(line))
		}
		if cap(buf) > 1<<20 {
			buf = nil // do not keep a large buffer around for small lines
		}
		buf = buf[:0]
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func trailingNewline(chunk []byte) int {
	return len(chunk) - len(bytes.TrimRight(chunk, "\r\n"))
}
