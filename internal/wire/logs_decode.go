package wire

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// DecodeLogAppend decodes an append body. Appends carry all of a job's
// output (a busy job sends megabytes a second), so the usual shape is
// parsed by hand, escapes included; anything unusual (null, quoted or
// fractional numbers, unknown fields, lone surrogates, malformed JSON)
// falls back to the strict general decoder, which also writes the error
// messages. FuzzDecodeLogAppend checks that the two agree whenever the
// fast path succeeds. body must be valid UTF-8 (httpapi's readBody checks).
func DecodeLogAppend(body []byte, req *LogAppendRequest) error {
	p := appendParser{b: body}
	if p.parse(req) {
		return nil
	}
	*req = LogAppendRequest{}
	return Decode(body, req)
}

type appendParser struct {
	b     []byte
	i     int
	arena []byte // unescaped texts, turned into one string at the end
}

func (p *appendParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *appendParser) eat(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads the JSON string at the cursor. A string without escapes is
// returned as its bounds in the body (arena false); one with escapes is
// unescaped into the arena and returned as its bounds there.
func (p *appendParser) str() (start, end int, arena, ok bool) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return 0, 0, false, false
	}
	p.i++
	j := p.i
	for j < len(p.b) && plain[p.b[j]] {
		j++
	}
	if j >= len(p.b) || p.b[j] < 0x20 {
		return 0, 0, false, false
	}
	if p.b[j] == '"' {
		start, p.i = p.i, j+1
		return start, j, false, true
	}
	// Escapes: unescape into the arena from the start of the string.
	start = len(p.arena)
	for {
		j := p.i
		for j < len(p.b) && plain[p.b[j]] {
			j++
		}
		p.arena = append(p.arena, p.b[p.i:j]...)
		p.i = j
		if j >= len(p.b) || p.b[j] < 0x20 {
			return 0, 0, false, false
		}
		if p.b[j] == '"' {
			p.i++
			return start, len(p.arena), true, true
		}
		if j+1 >= len(p.b) {
			return 0, 0, false, false
		}
		switch c := p.b[j+1]; c {
		case '"', '\\', '/':
			p.arena = append(p.arena, c)
		case 'b':
			p.arena = append(p.arena, '\b')
		case 'f':
			p.arena = append(p.arena, '\f')
		case 'n':
			p.arena = append(p.arena, '\n')
		case 'r':
			p.arena = append(p.arena, '\r')
		case 't':
			p.arena = append(p.arena, '\t')
		case 'u':
			r, ok := hex4(p.b, j+2)
			if !ok {
				return 0, 0, false, false
			}
			p.i = j + 6
			if utf16.IsSurrogate(r) {
				// Only a proper pair; a lone half goes to the strict path.
				if p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return 0, 0, false, false
				}
				r2, ok := hex4(p.b, p.i+2)
				if !ok {
					return 0, 0, false, false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return 0, 0, false, false
				}
				p.i += 6
			}
			p.arena = utf8.AppendRune(p.arena, r)
			continue
		default:
			return 0, 0, false, false
		}
		p.i = j + 2
	}
}

// plain marks the bytes that stand for themselves inside a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// key reads an object key and its colon; it returns the key's bytes
// (keys we know have no escapes; one with an escape goes to the strict
// path).
func (p *appendParser) key() ([]byte, bool) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return nil, false
	}
	j := p.i + 1
	for j < len(p.b) && p.b[j] != '"' && p.b[j] != '\\' {
		j++
	}
	if j >= len(p.b) || p.b[j] != '"' {
		return nil, false
	}
	k := p.b[p.i+1 : j]
	p.i = j + 1
	if !p.eat(':') {
		return nil, false
	}
	return k, true
}

// integer reads a JSON integer (no fraction or exponent).
func (p *appendParser) integer() (Int, bool) {
	p.ws()
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	d := j
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	if j == d || (p.b[d] == '0' && j-d > 1) || j-d > 18 {
		return Int{}, false
	}
	if j < len(p.b) && (p.b[j] == '.' || p.b[j] == 'e' || p.b[j] == 'E') {
		return Int{}, false
	}
	v, err := strconv.ParseInt(string(p.b[p.i:j]), 10, 64)
	if err != nil {
		return Int{}, false
	}
	p.i = j
	return Int{V: v, Set: true}, true
}

func (p *appendParser) boolean() (bool, bool) {
	p.ws()
	switch {
	case len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "true":
		p.i += 4
		return true, true
	case len(p.b)-p.i >= 5 && string(p.b[p.i:p.i+5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// textRef locates a string the parser read: in the body, or in the arena.
type textRef struct {
	line, start, end int
	arena            bool
}

func (t textRef) of(body, arena string) string {
	if t.arena {
		return arena[t.start:t.end]
	}
	return body[t.start:t.end]
}

func (p *appendParser) parse(req *LogAppendRequest) bool {
	var texts []textRef
	var src, run textRef
	seen := 0 // top-level keys seen, as bits: a repeated key goes to the strict path
	if !p.eat('{') {
		return false
	}
	if !p.eat('}') {
		for {
			k, ok := p.key()
			if !ok {
				return false
			}
			bit := 0
			switch string(k) {
			case "run_id":
				bit = 1
				if run.start, run.end, run.arena, ok = p.str(); !ok {
					return false
				}
			case "source":
				bit = 2
				if src.start, src.end, src.arena, ok = p.str(); !ok {
					return false
				}
			case "first_seq":
				bit = 4
				if req.FirstSeq, ok = p.integer(); !ok {
					return false
				}
			case "node":
				bit = 8
				if req.Node, ok = p.integer(); !ok {
					return false
				}
			case "local_rank":
				bit = 16
				if req.LocalRank, ok = p.integer(); !ok {
					return false
				}
			case "lines":
				bit = 32
				if texts, ok = p.lines(req); !ok {
					return false
				}
			default:
				return false
			}
			if seen&bit != 0 {
				return false
			}
			seen |= bit
			if p.eat(',') {
				continue
			}
			if !p.eat('}') {
				return false
			}
			break
		}
	}
	p.ws()
	if p.i != len(p.b) {
		return false
	}
	// Two allocations for all the strings of the request: the texts
	// share them.
	body, arena := string(p.b), string(p.arena)
	if seen&1 != 0 {
		req.RunID = run.of(body, arena)
	}
	if seen&2 != 0 {
		req.Source = src.of(body, arena)
	}
	for _, t := range texts {
		req.Lines[t.line].Text = t.of(body, arena)
	}
	return true
}

func (p *appendParser) lines(req *LogAppendRequest) ([]textRef, bool) {
	if !p.eat('[') {
		return nil, false
	}
	var texts []textRef
	if p.eat(']') {
		req.Lines = []LogLineIn{}
		return texts, true
	}
	// Size the slices once: every line is an object (braces in texts
	// only make the estimate generous).
	if n := bytes.Count(p.b[p.i:], []byte{'{'}); n > 0 {
		req.Lines = make([]LogLineIn, 0, n)
		texts = make([]textRef, 0, n)
	}
	for {
		req.Lines = append(req.Lines, LogLineIn{})
		n := len(req.Lines) - 1
		l := &req.Lines[n]
		if !p.eat('{') {
			return nil, false
		}
		seen := 0
		if !p.eat('}') {
			for {
				k, ok := p.key()
				if !ok {
					return nil, false
				}
				bit := 0
				switch string(k) {
				case "timestamp":
					bit = 1
					l.Timestamp, ok = p.integer()
				case "stream":
					bit = 2
					var s, e int
					var inArena bool
					if s, e, inArena, ok = p.str(); ok {
						if inArena {
							l.Stream = streamName(p.arena[s:e])
							p.arena = p.arena[:s]
						} else {
							l.Stream = streamName(p.b[s:e])
						}
					}
				case "text":
					bit = 4
					var t textRef
					if t.start, t.end, t.arena, ok = p.str(); ok {
						t.line = n
						texts = append(texts, t)
					}
				case "node":
					bit = 8
					l.Node, ok = p.integer()
				case "local_rank":
					bit = 16
					l.LocalRank, ok = p.integer()
				case "partial":
					bit = 32
					l.Partial, ok = p.boolean()
				case "cr":
					bit = 64
					l.CR, ok = p.boolean()
				default:
					return nil, false
				}
				if !ok || seen&bit != 0 {
					return nil, false
				}
				seen |= bit
				if p.eat(',') {
					continue
				}
				if !p.eat('}') {
					return nil, false
				}
				break
			}
		}
		if p.eat(',') {
			continue
		}
		if !p.eat(']') {
			return nil, false
		}
		return texts, true
	}
}

func streamName(b []byte) string {
	switch string(b) {
	case "stdout":
		return "stdout"
	case "stderr":
		return "stderr"
	}
	return string(b)
}
