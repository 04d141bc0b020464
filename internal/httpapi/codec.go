package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
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
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, invalid("Bad Request. Content-Type must be application/json, got %q", ct)
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
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
			return nil, jsonError(err)
		}
		body = []byte(inner)
	}
	return body, nil
}

// decodeJSON decodes body strictly into dst.
func decodeJSON(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return invalid("malformed JSON: unexpected data after the top-level value")
	}
	return nil
}

// jsonError turns an encoding/json error into a message for the client.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return invalid("malformed JSON at byte %d: %s", se.Offset, se.Error())
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return invalid("malformed request: expected a JSON object, got %s", te.Value)
		}
		return invalid("Invalid value for parameter '%s': expected %s, got %s", field, typeName(te.Type.String()), te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalid("malformed JSON: unexpected end of input")
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return invalid("unknown field %s in request: check the field name against the MLflow REST API", f)
	}
	return invalid("malformed request: %s", strings.TrimPrefix(msg, "json: "))
}

func typeName(goType string) string {
	switch goType {
	case "string":
		return "a string"
	case "httpapi.flexInt", "int64", "int32", "int":
		return "an integer"
	case "httpapi.flexFloat", "float64":
		return "a number"
	case "httpapi.flexEnum":
		return "an enum name"
	case "bool":
		return "a boolean"
	}
	if strings.HasPrefix(goType, "[]") {
		return "an array"
	}
	return "an object"
}

// flexInt is an int64 that accepts a JSON number or a numeric string, as
// protobuf JSON does. It remembers whether it was set.
type flexInt struct {
	V   int64
	Set bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *flexInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// Accept integral floats such as 1.0 or 1e3, which some JSON
		// encoders produce; refuse fractions.
		fv, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || fv != math.Trunc(fv) || math.Abs(fv) > 1<<63 {
			return typeErr(b, reflect.TypeFor[flexInt]())
		}
		v = int64(fv)
	}
	f.V, f.Set = v, true
	return nil
}

// flexFloat is a float64 that accepts a JSON number, a numeric string, and
// the strings "NaN", "Infinity" and "-Infinity" that MLflow uses for
// values JSON cannot hold.
type flexFloat struct {
	V   float64
	Set bool
	// Huge is set for a number beyond float64's range (1e400), read as
	// ±Inf; metrics store it so (MLflow clamps it), GPU readings refuse
	// it.
	Huge bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *flexFloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case "NaN", "nan":
			f.V, f.Set = math.NaN(), true
			return nil
		case "Infinity", "inf", "+Infinity":
			f.V, f.Set = math.Inf(1), true
			return nil
		case "-Infinity", "-inf":
			f.V, f.Set = math.Inf(-1), true
			return nil
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return typeErr(b, reflect.TypeFor[flexFloat]())
		}
		f.V, f.Set = v, true
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// Out of float64 range: MLflow clamps to ±max float; we store ±Inf.
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			f.V, f.Set, f.Huge = v, true, math.IsInf(v, 0)
			return nil
		}
		return typeErr(b, reflect.TypeFor[flexFloat]())
	}
	f.V, f.Set = v, true
	return nil
}

// typeErr reports a value of the wrong type the way encoding/json does, so
// that the decoder adds the field's path to it.
func typeErr(b []byte, t reflect.Type) error {
	v := "string " + truncate(string(b), 60)
	switch {
	case len(b) == 0:
		v = "nothing"
	case b[0] == 't' || b[0] == 'f':
		v = "bool"
	case b[0] == '[':
		v = "array"
	case b[0] == '{':
		v = "object"
	case b[0] != '"':
		v = "number " + truncate(string(b), 60)
	}
	return &json.UnmarshalTypeError{Value: v, Type: t}
}

// flexEnum is an enum that accepts its name or its number.
type flexEnum struct {
	Name string
	Num  int64
	Set  bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *flexEnum) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &f.Name); err != nil {
			return err
		}
		f.Set = true
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil {
		return typeErr(b, reflect.TypeFor[flexEnum]())
	}
	f.Num, f.Set = v, true
	return nil
}

// resolve maps the enum to its number using names (name -> number).
func (f flexEnum) resolve(field string, names map[string]int64) (int64, error) {
	if !f.Set {
		return 0, nil
	}
	if f.Name != "" {
		if v, ok := names[f.Name]; ok {
			return v, nil
		}
		if n, err := strconv.ParseInt(f.Name, 10, 32); err == nil {
			f.Num = n
		} else {
			return 0, invalid("Invalid value '%s' for parameter '%s': expected one of %s", truncate(f.Name, 60), field, enumList(names))
		}
	}
	for _, v := range names {
		if v == f.Num {
			return v, nil
		}
	}
	return 0, invalid("Invalid value %d for parameter '%s': expected one of %s", f.Num, field, enumList(names))
}

func enumList(names map[string]int64) string {
	var parts []string
	for n := range names {
		parts = append(parts, n)
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
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
			return query{}, invalid("unknown query parameter '%s': this endpoint takes %s", truncate(k, 60), strings.Join(known, ", "))
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
		return 0, false, invalid("Invalid value '%s' for parameter '%s': expected an integer", truncate(s, 60), k)
	}
	return v, true, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
