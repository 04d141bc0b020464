package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
)

// This file decodes MLflow requests. POST bodies are JSON with the proto
// field names; GET requests carry the same fields as query parameters,
// repeated fields as repeated keys. Decoding is strict: unknown fields,
// wrong types, invalid UTF-8 and malformed JSON are 400s that say what was
// wrong, because a silently ignored field is a silently lost setting.

func invalid(format string, args ...any) error {
	return errs.Errorf(errs.Invalid, format, args...)
}

// readBody reads a JSON request body, enforcing the size limit and UTF-8.
// An empty body reads as "{}", as in MLflow.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return s.readBodyInto(w, r, new(bytes.Buffer))
}

// readBodyInto is readBody reading into buf, which must be empty; the body
// returned is buf's bytes, or a copy of them.
func (s *Server) readBodyInto(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, invalid("Bad Request. Content-Type must be application/json, got %q", ct)
		}
	}
	// A body of known length is read into one buffer of its size (a
	// log-batch is about 80 KB: io.ReadAll would grow and copy it eight
	// times). MinRead more, so the read that finds the end does not grow it.
	// Not more than 1 MiB ahead of the bytes themselves: a declared length
	// alone must not make the server hold memory.
	if n := r.ContentLength; n > 0 && n <= s.opts.MaxBodyBytes {
		buf.Grow(int(min(n, 1<<20)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &errs.Error{Code: errs.LimitExceeded, Msg: fmt.Sprintf("limit exceeded: request body is larger than the limit of %d bytes", s.opts.MaxBodyBytes), Err: errBodyTooLarge}
		}
		return nil, invalid("could not read the request body: %v", err)
	}
	if !utf8.Valid(body) {
		return nil, invalid("request body is not valid UTF-8")
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return []byte("{}"), nil
	}
	// Old clients send the JSON document as a JSON string.
	if body[0] == '"' {
		var inner string
		if err := json.Unmarshal(body, &inner); err != nil {
			return nil, wire.DecodeError(err)
		}
		body = []byte(inner)
	}
	return body, nil
}

// query is a GET request's parameters, checked against the fields the
// endpoint knows.
type query struct {
	v url.Values
}

// parseQuery parses r's query string and refuses unknown parameters.
func parseQuery(r *http.Request, known ...string) (query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, invalid("malformed query string: %v", err)
	}
	for k, vals := range v {
		ok := false
		for _, kk := range known {
			if k == kk {
				ok = true
				break
			}
		}
		if !ok {
			return query{}, invalid("unknown query parameter '%s': this endpoint takes %s", errs.Truncate(k, 60), strings.Join(known, ", "))
		}
		for _, s := range vals {
			if !utf8.ValidString(s) {
				return query{}, invalid("query parameter '%s' is not valid UTF-8", k)
			}
		}
	}
	return query{v: v}, nil
}

func (q query) str(k string) string { return q.v.Get(k) }

func (q query) list(k string) []string { return q.v[k] }

func (q query) has(k string) bool { return q.v.Has(k) }

func (q query) int(k string) (int64, bool, error) {
	s := q.v.Get(k)
	if s == "" {
		return 0, false, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, wire.InvalidValue(k, errs.Truncate(s, 60))
	}
	return v, true, nil
}
