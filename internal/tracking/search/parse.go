package search

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// The lexical rules, shared by filters and order_by:
//
//   - Whitespace is ASCII space, tab, newline, carriage return, form feed
//     and vertical tab.
//   - An identifier is `prefix.key`, a bare attribute name, or a quoted
//     attribute name. The prefix is everything before the first dot; a bare
//     key is a run of [A-Za-z0-9_./:-], so `tags.mlflow.runName` has key
//     `mlflow.runName`. A key (or a whole attribute name) may be quoted with
//     backticks or double quotes and then holds any byte but its closing
//     quote; there are no escapes in quoted keys.
//   - A string value is quoted with single or double quotes. The quote
//     character doubled stands for itself ('it''s'); there are no other
//     escapes, so a backslash is an ordinary character.
//   - A number is an optional sign, digits with an optional fraction (or a
//     fraction alone, as in .5) and an optional exponent. Numbers beyond
//     float64 are rejected; NaN and Inf are not numbers.
//   - Keywords (AND, LIKE, NOT IN, IS NULL, ASC, ...) are case-insensitive.
//     Prefixes and attribute names are case-sensitive, as in MLflow.

// ParseRunFilter parses a runs/search filter string such as
// `metrics.loss < 0.5 AND params.lr = '0.01'`. An empty or all-whitespace
// string gives the zero Filter, which matches every run. Errors are
// *errs.Error with Code errs.Invalid and say what was wrong and where.
//
// IN lists are returned as written. MLflow drops run ids that are not all
// lower case from `run_id IN (...)` because MySQL compares ids without case;
// storage adapters must compare case-sensitively instead, so such ids simply
// match nothing.
func ParseRunFilter(s string) (Filter, error) {
	return parseFilter(s, &runDialect)
}

// ParseExperimentFilter parses an experiments/search filter string such as
// `name LIKE 'bert-%' AND tags.team = 'nlp'`. An empty or all-whitespace
// string gives the zero Filter. Errors are as in ParseRunFilter.
func ParseExperimentFilter(s string) (Filter, error) {
	return parseFilter(s, &experimentDialect)
}

// ParseLoggedModelFilter parses a logged-models/search filter string such
// as `name = 'model' AND metrics.accuracy > 0.9`.
func ParseLoggedModelFilter(s string) (Filter, error) {
	return parseFilter(s, &loggedModelDialect)
}

// ParseRegisteredModelFilter parses a registered-models/search filter
// string such as `name LIKE 'bert%'`.
func ParseRegisteredModelFilter(s string) (Filter, error) {
	return parseFilter(s, &registeredModelDialect)
}

// ParseModelVersionFilter parses a model-versions/search filter string such
// as `name = 'bert' AND run_id = '...'`.
func ParseModelVersionFilter(s string) (Filter, error) {
	return parseFilter(s, &modelVersionDialect)
}

func parseFilter(s string, d *dialect) (Filter, error) {
	p := &parser{src: s, what: "filter"}
	p.skipSpace()
	if p.eof() {
		return Filter{}, nil
	}
	var f Filter
	for {
		c, err := p.comparison(d)
		if err != nil {
			return Filter{}, err
		}
		f.Clauses = append(f.Clauses, c)
		p.skipSpace()
		if p.eof() {
			return f, nil
		}
		at := p.pos
		w := p.word()
		switch strings.ToUpper(w) {
		case "AND":
			p.skipSpace()
			if p.eof() {
				return Filter{}, p.errorf(p.pos, "expected a comparison after %q, got end of input", w)
			}
		case "OR":
			return Filter{}, p.errorf(at, "%q is not supported: comparisons can only be joined with AND", w)
		default:
			return Filter{}, p.errorf(at, "expected AND or the end of the filter, got %s", p.describe(at))
		}
	}
}

// parser is a cursor over one filter string or one order_by item.
type parser struct {
	src string
	pos int // byte offset of the next unread byte
	// what names the input in messages: "filter" or "order_by".
	what string
}

// maxShown bounds how much of the input an error message repeats, so that a
// huge filter does not produce a huge error.
const maxShown = 200

// errorf returns an errs.Invalid error naming the input and the 1-based
// character position of byte offset at.
func (p *parser) errorf(at int, format string, args ...any) error {
	return p.hinted(at, "", format, args...)
}

// hinted is errorf with a hint on how to fix the input, which goes after the
// position so that the position stays next to what it points at.
func (p *parser) hinted(at int, hint, format string, args ...any) error {
	pos := utf8.RuneCountInString(p.src[:at]) + 1
	msg := fmt.Sprintf("invalid %s %s: %s at position %d",
		p.what, shorten(p.src, maxShown), fmt.Sprintf(format, args...), pos)
	if hint != "" {
		msg += "; " + hint
	}
	return errs.E(errs.Invalid, msg)
}

// shorten quotes s, cutting it to at most n runes.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return strconv.Quote(s)
	}
	cut := 0
	for i := 0; i < n; i++ {
		_, size := utf8.DecodeRuneInString(s[cut:])
		cut += size
	}
	return strconv.Quote(s[:cut]) + "..."
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.src[p.pos]
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// isKeyChar reports whether c may appear in a bare key. Keywords are read
// with the same rule so that `a = 1 ANDb` is not taken for `AND b`.
func isKeyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == '/' || c == ':' || c == '-'
}

func isOpChar(c byte) bool { return c == '=' || c == '!' || c == '<' || c == '>' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isQuote(c byte) bool { return c == '\'' || c == '"' }

func (p *parser) skipSpace() {
	for !p.eof() && isSpace(p.src[p.pos]) {
		p.pos++
	}
}

// scan consumes and returns the longest run of bytes satisfying ok.
func (p *parser) scan(ok func(byte) bool) string {
	start := p.pos
	for !p.eof() && ok(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// word consumes a keyword-shaped run (see isKeyChar).
func (p *parser) word() string { return p.scan(isKeyChar) }

// maxToken bounds how much of one token an error message repeats.
const maxToken = 40

// describe renders the token at byte offset at for an error message: the
// quoted token, or "end of input".
func (p *parser) describe(at int) string {
	s := p.src[at:]
	if s == "" {
		return "end of input"
	}
	n := 0
	switch c := s[0]; {
	case isQuote(c) || c == '`':
		n = strings.IndexByte(s[1:], c) + 2
		if n == 1 { // unterminated: show what there is
			n = len(s)
		}
	case isKeyChar(c) || c == '+':
		n = 1
		for n < len(s) && (isKeyChar(s[n]) || s[n] == '+') {
			n++
		}
	case isOpChar(c):
		for n < len(s) && isOpChar(s[n]) {
			n++
		}
	default:
		_, n = utf8.DecodeRuneInString(s)
	}
	return shorten(s[:n], maxToken)
}

// ident is an identifier as written, before the dialect resolves it.
type ident struct {
	start, end int // byte offsets of the whole identifier
	keyStart   int // byte offset of the key, for key errors
	text       string
	hasPrefix  bool
	prefix     string
	key        string // unquoted
}

// ident reads an identifier at the cursor.
func (p *parser) ident() (ident, error) {
	id := ident{start: p.pos, keyStart: p.pos}
	c := p.peek()
	switch {
	case c == '`' || c == '"':
		key, err := p.quotedKey()
		if err != nil {
			return ident{}, err
		}
		id.key = key
	case isKeyChar(c):
		run := p.word()
		prefix, rest, found := strings.Cut(run, ".")
		if !found {
			id.key = run
			break
		}
		if prefix == "" {
			return ident{}, p.errorf(id.start, "expected a prefix such as metrics or params before the dot in %q", run)
		}
		id.hasPrefix, id.prefix = true, prefix
		id.keyStart = id.start + len(prefix) + 1
		if rest != "" {
			id.key = rest
			break
		}
		if q := p.peek(); q != '`' && q != '"' {
			return ident{}, p.errorf(p.pos, "expected a key after %q, got %s", run, p.describe(p.pos))
		}
		key, err := p.quotedKey()
		if err != nil {
			return ident{}, err
		}
		id.key = key
	case p.eof():
		return ident{}, p.errorf(p.pos, "expected an identifier such as metrics.loss, got end of input")
	case c == '(' && p.what == "filter":
		return ident{}, p.errorf(p.pos, "parentheses are only allowed around the list after IN or NOT IN")
	default:
		return ident{}, p.errorf(p.pos, "expected an identifier such as metrics.loss, got %s", p.describe(p.pos))
	}
	id.end = p.pos
	id.text = p.src[id.start:id.end]
	return id, nil
}

// quotedKey reads a key quoted with backticks or double quotes.
func (p *parser) quotedKey() (string, error) {
	at := p.pos
	q := p.src[at]
	n := strings.IndexByte(p.src[at+1:], q)
	if n < 0 {
		return "", p.errorf(at, "unterminated quoted key: missing closing %c", q)
	}
	if n == 0 {
		return "", p.errorf(at, "empty key %s", p.src[at:at+2])
	}
	p.pos = at + 1 + n + 1
	return p.src[at+1 : at+1+n], nil
}

// comparison reads `identifier operator [value]`.
func (p *parser) comparison(d *dialect) (Comparison, error) {
	id, err := p.ident()
	if err != nil {
		return Comparison{}, err
	}
	t, err := d.resolve(p, id, false)
	if err != nil {
		return Comparison{}, err
	}
	p.skipSpace()
	opAt := p.pos
	op, err := p.op(id)
	if err != nil {
		return Comparison{}, err
	}
	if !t.rule.allows(op) {
		return Comparison{}, p.hinted(opAt, "use one of "+t.rule.opList(), "operator %q is not supported for %s", string(op), t.label())
	}
	c := Comparison{Entity: t.entity, Key: t.key, Op: op}
	switch t.rule.valueKind(op) {
	case NoValue:
	case List:
		p.skipSpace()
		list, err := p.list(op)
		if err != nil {
			return Comparison{}, err
		}
		c.Value = Value{Kind: List, List: list}
	default:
		p.skipSpace()
		v, err := p.scalar(op, t)
		if err != nil {
			return Comparison{}, err
		}
		c.Value = v
	}
	return c, nil
}

const opHelp = "=, !=, <, <=, >, >=, LIKE, ILIKE, IN, NOT IN, IS NULL or IS NOT NULL"

// op reads an operator and normalises it to an Op constant.
func (p *parser) op(id ident) (Op, error) {
	at := p.pos
	c := p.peek()
	switch {
	case p.eof():
		return "", p.errorf(at, "expected an operator after %q, got end of input", id.text)
	case isOpChar(c):
		tok := p.scan(isOpChar)
		if o := Op(tok); slices.Contains(Ops(), o) {
			return o, nil
		}
		return "", p.hinted(at, "use "+opHelp, "unknown operator %q", tok)
	case isKeyChar(c):
		w := p.word()
		switch strings.ToUpper(w) {
		case "LIKE":
			return OpLike, nil
		case "ILIKE":
			return OpILike, nil
		case "IN":
			return OpIn, nil
		case "NOT":
			p.skipSpace()
			at2 := p.pos
			if w2 := p.word(); strings.EqualFold(w2, "IN") {
				return OpNotIn, nil
			}
			return "", p.hinted(at2, "NOT only appears in NOT IN and IS NOT NULL", "expected IN after %q, got %s", w, p.describe(at2))
		case "IS":
			p.skipSpace()
			at2 := p.pos
			w2 := p.word()
			if strings.EqualFold(w2, "NULL") {
				return OpIsNull, nil
			}
			if strings.EqualFold(w2, "NOT") {
				p.skipSpace()
				at3 := p.pos
				if w3 := p.word(); strings.EqualFold(w3, "NULL") {
					return OpIsNotNull, nil
				}
				return "", p.errorf(at3, "expected NULL after \"IS NOT\", got %s", p.describe(at3))
			}
			return "", p.errorf(at2, "expected NULL or NOT NULL after %q, got %s", w, p.describe(at2))
		}
		return "", p.hinted(at, "use "+opHelp, "unknown operator %q after %q", w, id.text)
	}
	return "", p.errorf(at, "expected an operator after %q, got %s", id.text, p.describe(at))
}

// scalar reads the String or Number the target's rule asks for.
func (p *parser) scalar(op Op, t target) (Value, error) {
	at := p.pos
	c := p.peek()
	if p.eof() {
		return Value{}, p.errorf(at, "expected a value after %q, got end of input", string(op))
	}
	// Check the kind before the token itself, so that `params.a = 5x` says
	// a string is expected rather than that 5x is a bad number.
	wrongKind := func(hint string) error {
		if t.rule.scalar == Number {
			return p.hinted(at, hint, "expected a number for %s, got %s", t.label(), p.describe(at))
		}
		return p.hinted(at, hint, "expected a quoted string such as 'value' for %s, got %s", t.label(), p.describe(at))
	}
	switch {
	case isQuote(c):
		if t.rule.scalar != String {
			return Value{}, wrongKind("")
		}
		s, err := p.str()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: String, Str: s}, nil
	case isDigit(c) || c == '.' || c == '+' || c == '-':
		if t.rule.scalar != Number {
			return Value{}, wrongKind("")
		}
		n, err := p.number()
		if err != nil {
			return Value{}, err
		}
		return Value{Kind: Number, Num: n}, nil
	case c == '(':
		return Value{}, wrongKind("a parenthesised list is only allowed after IN or NOT IN")
	}
	return Value{}, wrongKind("")
}

// str reads a string literal in single or double quotes; the quote doubled
// stands for itself.
func (p *parser) str() (string, error) {
	at := p.pos
	q := p.src[at]
	i := at + 1
	var b strings.Builder
	for {
		n := strings.IndexByte(p.src[i:], q)
		if n < 0 {
			return "", p.errorf(at, "unterminated string: missing closing %c", q)
		}
		b.WriteString(p.src[i : i+n])
		i += n + 1
		if i < len(p.src) && p.src[i] == q {
			b.WriteByte(q)
			i++
			continue
		}
		p.pos = i
		return b.String(), nil
	}
}

// number reads a numeric literal.
func (p *parser) number() (float64, error) {
	at := p.pos
	s := p.src
	i := at
	if s[i] == '+' || s[i] == '-' {
		i++
	}
	digits := 0
	for i < len(s) && isDigit(s[i]) {
		i, digits = i+1, digits+1
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && isDigit(s[i]) {
			i, digits = i+1, digits+1
		}
	}
	ok := digits > 0
	if ok && i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for i < len(s) && isDigit(s[i]) {
			i, exp = i+1, exp+1
		}
		ok = exp > 0
	}
	// A number glued to more key characters (5x, 1.2.3, 1-2) is one bad token.
	if !ok || i < len(s) && isKeyChar(s[i]) {
		return 0, p.errorf(at, "invalid number %s", p.describe(at))
	}
	n, err := strconv.ParseFloat(s[at:i], 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, p.errorf(at, "number %q is out of range", s[at:i])
		}
		return 0, p.errorf(at, "invalid number %q", s[at:i])
	}
	p.pos = i
	return n, nil
}

// list reads `('a', "b", ...)`: at least one quoted string, no trailing comma.
func (p *parser) list(op Op) ([]string, error) {
	open := p.pos
	if p.peek() != '(' {
		return nil, p.errorf(open, "expected a parenthesised list of quoted strings such as ('a', 'b') after %q, got %s", string(op), p.describe(open))
	}
	p.pos++
	p.skipSpace()
	if p.peek() == ')' {
		return nil, p.errorf(p.pos, "empty list after %q: give at least one quoted string", string(op))
	}
	var out []string
	for {
		p.skipSpace()
		at := p.pos
		switch c := p.peek(); {
		case p.eof():
			return nil, p.errorf(open, "unterminated list: missing closing )")
		case isQuote(c):
			s, err := p.str()
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		case c == ')':
			return nil, p.errorf(at, "trailing comma before \")\" in the list after %q", string(op))
		default:
			return nil, p.errorf(at, "the list after %q may only hold quoted strings, got %s", string(op), p.describe(at))
		}
		p.skipSpace()
		at = p.pos
		switch c := p.peek(); {
		case p.eof():
			return nil, p.errorf(open, "unterminated list: missing closing )")
		case c == ',':
			p.pos++
		case c == ')':
			p.pos++
			return out, nil
		default:
			return nil, p.errorf(at, "expected \",\" or \")\" in the list after %q, got %s", string(op), p.describe(at))
		}
	}
}
