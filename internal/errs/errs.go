// Package errs defines the error type shared by every Sextant package.
//
// Domain and storage code return *Error values carrying a Code; the HTTP edge
// (internal/httpapi) is the only place that turns a Code into a wire error
// code and an HTTP status. Any error that is not an *Error counts as Internal.
package errs

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Code classifies an error by what the caller can do about it.
type Code string

// The codes. Each maps to exactly one MLflow error_code and HTTP status in
// internal/httpapi/errors.go.
const (
	// Invalid means the request itself is wrong: a bad value, a missing field,
	// a filter that does not parse.
	Invalid Code = "invalid"
	// LimitExceeded means a configured hard limit would be breached.
	LimitExceeded Code = "limit_exceeded"
	// NotFound means the named resource does not exist.
	NotFound Code = "not_found"
	// AlreadyExists means a resource with that identity exists already.
	AlreadyExists Code = "already_exists"
	// Conflict means the resource is in a state that does not allow the
	// operation (for example renaming a deleted experiment).
	Conflict Code = "conflict"
	// Unauthenticated means no valid credentials were presented.
	Unauthenticated Code = "unauthenticated"
	// PermissionDenied means the caller is known but not allowed.
	PermissionDenied Code = "permission_denied"
	// Throttled means the caller should slow down and retry.
	Throttled Code = "throttled"
	// Unavailable means a transient server-side condition; retrying may help.
	Unavailable Code = "unavailable"
	// InsufficientStorage means the server's storage is full (a disk out of
	// space or over quota, an object store at its limit). The request was
	// valid and may succeed once space is freed; the HTTP edge answers 507.
	InsufficientStorage Code = "insufficient_storage"
	// PreconditionFailed means a condition the request set does not hold
	// (an If-Unmodified-Since that the resource was modified after).
	PreconditionFailed Code = "precondition_failed"
	// NotImplemented means the feature does not exist on this server.
	NotImplemented Code = "not_implemented"
	// Internal means a bug or an unexpected failure.
	Internal Code = "internal"
)

// Error is an error with a Code, a message that is safe to show to clients,
// and an optional underlying error that only goes to logs.
type Error struct {
	Code Code
	// Msg is shown to clients. It must not leak internals.
	Msg string
	// Hint, when set, tells an operator how to fix the condition.
	Hint string
	// Err is the underlying cause, for logs only.
	Err error
}

// Error implements the error interface.
func (e *Error) Error() string {
	switch {
	case e.Err != nil && e.Msg != "":
		return e.Msg + ": " + e.Err.Error()
	case e.Err != nil:
		return e.Err.Error()
	default:
		return e.Msg
	}
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// E returns an *Error with the given code and message.
func E(code Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// RunLimit returns the LimitExceeded error for a write that would take a
// run past a per-run limit (of metrics, params, log lines, events...). The
// message names the limit, what the run holds, what the write adds and the
// maximum, so that a user reading the client's exception knows what to
// change; hint says what to do about it.
func RunLimit(limit string, have, adding, max int64, hint string) *Error {
	return &Error{Code: LimitExceeded, Msg: fmt.Sprintf("limit exceeded: %s: the run has %d, this request adds %d, the maximum is %d", limit, have, adding, max), Hint: hint}
}

// Errorf returns an *Error with the given code and a formatted message.
// Unlike fmt.Errorf it does not wrap: use Wrap to keep a cause.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the given code and message that keeps err as
// its cause.
func Wrap(code Code, err error, msg string) *Error {
	return &Error{Code: code, Msg: msg, Err: err}
}

// CodeOf returns the Code of the first *Error in err's chain, Internal for any
// other non-nil error, and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// MessageOf returns the client-safe message of err: the Msg of the first
// *Error in its chain, or "internal error" for any other error.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != Internal && e.Msg != "" {
		return e.Msg
	}
	return "internal error"
}

// Transient reports whether retrying err may help: its code is
// Unavailable or Throttled (a server that could not be reached, or
// answered 429 or a 5xx other than 501 and 507).
func Transient(err error) bool {
	switch CodeOf(err) {
	case Unavailable, Throttled:
		return true
	}
	return false
}

// Is reports whether err carries the given code.
func Is(err error, code Code) bool { return CodeOf(err) == code }

// Truncate returns s cut to at most n bytes, on a UTF-8 character
// boundary, followed by "..." when it was cut: for quoting a client's
// input, which may be long, in a message. n below 0 counts as 0.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Clip(s, n) + "..."
}

// Clip returns the longest prefix of s that is at most n bytes long and
// does not end inside a UTF-8 character: s itself when it is no longer
// than n. It is Truncate without the "...", for a field that is stored
// cut rather than quoted. n below 0 counts as 0.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
