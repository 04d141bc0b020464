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
	return s.readBodyInto(w, r, new(bytes.Buffer), s.opts.MaxBodyBytes)
}

// readBodyInto is readBody reading into buf, which must be empty, and
// taking at most limit bytes; the body returned is buf's bytes, or a copy
// of them.
func (s *Server) readBodyInto(w http.ResponseWriter, r *http.Request, buf *bytes.Buffer, limit int64) ([]byte, error) {
	ct := r.Header.Get("Content-Type")
	if ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, invalid("Bad Request. Content-Type must be application/json, got %q", ct)
		}
	} else if r.ContentLength != 0 {
		// A body without a type is what a page of another site can send
		// without the browser asking the server first (a "simple"
		// request); every client of the API says application/json.
		return nil, invalid("Bad Request. Content-Type must be application/json: the request has a body and no Content-Type")
	}
	if r.ContentLength > limit {
		// Refused before a byte of it is read, rather than after limit
		// bytes have come in at whatever pace the client likes.
		return nil, bodyTooLarge(limit)
	}
	// The buffer grows with the bytes that arrive (ReadFrom doubles it as
	// needed), never from the declared length: a client may declare 10 MB
	// and send one byte, on as many connections as it likes. A pooled
	// buffer (log-batch) keeps its size from one request to the next.
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, bodyTooLarge(limit)
		}
		if errors.Is(err, errBodyTooSlow) {
			return nil, err
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

func bodyTooLarge(limit int64) error {
	return &errs.Error{Code: errs.LimitExceeded, Msg: fmt.Sprintf("limit exceeded: request body is larger than the limit of %d bytes", limit), Err: errBodyTooLarge}
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
