package runlogs

import (
	"bytes"
	"unicode/utf8"
)

// Splitter cuts one output stream into line records. Feed it the bytes as
// they are read with Write; it calls the emit function given to New for
// every complete record. The rules (docs/run.md, "What is stored"):
//
//   - "\n" and "\r\n" end a line; the terminator is not part of the text.
//   - "\r" alone ends a record flagged FlagCR: a progress bar that redraws
//     itself with "\r" is stored as one record per redraw, and a reader
//     that writes each record followed by its Terminator reproduces the
//     output. An empty "\r" record (the "\r" that starts a redraw) is not
//     stored. A "\r" that ends a Write waits for the next byte, which may
//     make it "\r\n".
//   - A line longer than the limit is cut into records of at most limit
//     bytes; every record but the last is flagged FlagPartial. Cuts fall
//     on UTF-8 character boundaries.
//   - Invalid UTF-8 is replaced: each run of invalid bytes becomes one
//     U+FFFD. Other bytes (ANSI escapes, NUL, tabs) are kept as they are.
//
// A Splitter is not safe for concurrent use.
type Splitter struct {
	limit   int
	emit    func(text []byte, f Flags)
	pending []byte // the current line's bytes, not yet ended
	cr      bool   // pending ended with a "\r" whose meaning waits for the next byte
	fixed   []byte // scratch for UTF-8 repair
}

// NewSplitter returns a Splitter that cuts records at limit bytes (0 means
// MaxLineBytes) and passes each record to emit. The text passed to emit is
// valid UTF-8 and valid only until emit returns.
func NewSplitter(limit int, emit func(text []byte, f Flags)) *Splitter {
	if limit <= 0 {
		limit = MaxLineBytes
	}
	// A cut must leave room for one whole character.
	limit = max(limit, utf8.UTFMax)
	return &Splitter{limit: limit, emit: emit}
}

// Write splits p. It never fails and always consumes all of p.
func (s *Splitter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if s.cr {
			s.cr = false
			if p[0] == '\n' {
				s.emitLine(s.pending, 0)
				s.pending = s.pending[:0]
				p = p[1:]
				continue
			}
			s.emitLine(s.pending, FlagCR)
			s.pending = s.pending[:0]
		}
		nl := bytes.IndexByte(p, '\n')
		seg := p
		if nl >= 0 {
			seg = p[:nl]
		}
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			// A "\r" comes first. "\r\n" ends a line as "\n" does.
			line := p[:cr]
			if cr+1 == len(p) {
				s.add(line)
				s.cr = true
				return n, nil
			}
			if p[cr+1] == '\n' {
				s.end(line, 0)
				p = p[cr+2:]
			} else {
				s.end(line, FlagCR)
				p = p[cr+1:]
			}
			continue
		}
		if nl < 0 {
			s.add(p)
			return n, nil
		}
		s.end(seg, 0)
		p = p[nl+1:]
	}
	return n, nil
}

// add appends b to the pending line, emitting full-length partial records.
func (s *Splitter) add(b []byte) {
	for len(s.pending)+len(b) > s.limit {
		take := s.limit - len(s.pending)
		s.pending = append(s.pending, b[:take]...)
		b = b[take:]
		// pending holds limit bytes and b at least one more: cut a record,
		// but not inside a character that continues in b.
		cut := s.limit
		if !utf8.RuneStart(b[0]) {
			if i := lastRuneStart(s.pending); i > 0 && runeLen(s.pending[i]) > len(s.pending)-i {
				cut = i
			}
		}
		s.emitLine(s.pending[:cut], FlagPartial)
		rest := len(s.pending) - cut
		copy(s.pending, s.pending[cut:])
		s.pending = s.pending[:rest]
	}
	s.pending = append(s.pending, b...)
}

// runeLen returns the length of the character a UTF-8 lead byte starts, or
// 0 for a byte that cannot start a multi-byte character.
func runeLen(lead byte) int {
	switch {
	case lead&0xE0 == 0xC0:
		return 2
	case lead&0xF0 == 0xE0:
		return 3
	case lead&0xF8 == 0xF0:
		return 4
	}
	return 0
}

// end ends the pending line plus b with flags f.
func (s *Splitter) end(b []byte, f Flags) {
	if len(s.pending) == 0 && len(b) <= s.limit {
		s.emitLine(b, f)
		return
	}
	s.add(b)
	s.emitLine(s.pending, f)
	s.pending = s.pending[:0]
}

// emitLine repairs UTF-8 and emits text, in several records if the repair
// made it longer than the limit.
func (s *Splitter) emitLine(text []byte, f Flags) {
	if f&FlagCR != 0 && len(text) == 0 {
		return
	}
	if !utf8.Valid(text) {
		s.fixed = appendValidUTF8(s.fixed[:0], text)
		text = s.fixed
	}
	for len(text) > s.limit {
		cut := s.limit
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		s.emit(text[:cut], FlagPartial)
		text = text[cut:]
	}
	s.emit(text, f)
}

// Flush ends the stream: what is pending is emitted as a last record
// (a pending "\r" makes it a FlagCR record).
func (s *Splitter) Flush() {
	switch {
	case s.cr:
		s.emitLine(s.pending, FlagCR)
	case len(s.pending) > 0:
		s.emitLine(s.pending, 0)
	}
	s.cr = false
	s.pending = s.pending[:0]
}

// FlushPartial emits the pending bytes of an unfinished line as a record
// flagged FlagPartial, so that a line written without its end shows up in
// the log before the end arrives. It does nothing while a "\r" waits for
// its next byte. It reports whether it emitted a record.
func (s *Splitter) FlushPartial() bool {
	if s.cr || len(s.pending) == 0 {
		return false
	}
	cut := len(s.pending)
	// Keep an incomplete character for the next record.
	if i := lastRuneStart(s.pending); i >= 0 && !utf8.FullRune(s.pending[i:]) {
		cut = i
	}
	if cut == 0 {
		return false
	}
	s.emitLine(s.pending[:cut], FlagPartial)
	rest := len(s.pending) - cut
	copy(s.pending, s.pending[cut:])
	s.pending = s.pending[:rest]
	return true
}

// Pending returns the number of bytes waiting for the end of their line.
func (s *Splitter) Pending() int { return len(s.pending) }

func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}

// appendValidUTF8 appends b to dst with each run of invalid bytes replaced
// by U+FFFD (as bytes.ToValidUTF8 does, without allocating).
func appendValidUTF8(dst, b []byte) []byte {
	invalid := false
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			invalid = false
			i++
			continue
		}
		_, size := utf8.DecodeRune(b[i:])
		if size == 1 {
			if !invalid {
				dst = append(dst, "\uFFFD"...)
				invalid = true
			}
			i++
			continue
		}
		dst = append(dst, b[i:i+size]...)
		invalid = false
		i += size
	}
	return dst
}
