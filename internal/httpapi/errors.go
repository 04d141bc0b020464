package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// wireError is how each domain error code goes on the wire. This table is
// the only place that knows MLflow error codes and HTTP statuses.
//
// The mlflow client retries 408, 429 and every 5xx for minutes, so a client
// mistake must never map to one of them; a limit breach is a 400 that
// names the limit, so the client fails at once with a useful message.
var wireErrors = map[errs.Code]struct {
	code   string
	status int
}{
	errs.Invalid:          {"INVALID_PARAMETER_VALUE", http.StatusBadRequest},
	errs.LimitExceeded:    {"RESOURCE_LIMIT_EXCEEDED", http.StatusBadRequest},
	errs.NotFound:         {"RESOURCE_DOES_NOT_EXIST", http.StatusNotFound},
	errs.AlreadyExists:    {"RESOURCE_ALREADY_EXISTS", http.StatusBadRequest},
	errs.Conflict:         {"RESOURCE_CONFLICT", http.StatusConflict},
	errs.Unauthenticated:  {"UNAUTHENTICATED", http.StatusUnauthorized},
	errs.PermissionDenied: {"PERMISSION_DENIED", http.StatusForbidden},
	errs.Throttled:        {"REQUEST_LIMIT_EXCEEDED", http.StatusTooManyRequests},
	errs.Unavailable:      {"TEMPORARILY_UNAVAILABLE", http.StatusServiceUnavailable},
	errs.NotImplemented:   {"NOT_IMPLEMENTED", http.StatusNotImplemented},
	errs.Internal:         {"INTERNAL_ERROR", http.StatusInternalServerError},
	// A full disk (the database's or the artifacts') is the server's
	// problem, but retrying will not help soon: an operator has to free
	// space. 507 is not among the statuses the mlflow client retries, so
	// a log call fails at once with a message saying the disk is full,
	// instead of blocking the training loop for about four minutes of
	// retries (503) and failing then anyway. Sextant's own clients (the
	// GPU agent, sextant run's log shipper) keep what they send and
	// retry a 507.
	errs.InsufficientStorage: {"RESOURCE_EXHAUSTED", http.StatusInsufficientStorage},
	// A condition of the request (If-Unmodified-Since) does not hold.
	errs.PreconditionFailed: {"PRECONDITION_FAILED", http.StatusPreconditionFailed},
}

// apiWireErrors overrides wireErrors for the APIs that follow Databricks'
// conventions rather than MLflow's, by path prefix: the Files API answers a
// file that exists (overwrite=false) with 409 ALREADY_EXISTS and a missing
// one with 404 NOT_FOUND; Unity Catalog answers duplicates with 409. The
// Databricks SDKs map 409 to ResourceConflict/AlreadyExists.
var apiWireErrors = []struct {
	prefix string
	codes  map[errs.Code]apiWireError
}{
	{"/api/2.0/fs/", map[errs.Code]apiWireError{
		errs.AlreadyExists: {"ALREADY_EXISTS", http.StatusConflict},
		errs.NotFound:      {"NOT_FOUND", http.StatusNotFound},
	}},
	{"/api/2.1/unity-catalog/", map[errs.Code]apiWireError{
		errs.AlreadyExists: {"RESOURCE_ALREADY_EXISTS", http.StatusConflict},
	}},
}

type apiWireError struct {
	code   string
	status int
}

// errBodyTooLarge is returned by the decoder when a body is over the limit;
// it is the one client error with its own status (413).
var errBodyTooLarge = errors.New("request body too large")

// writeError writes err as an MLflow error body. Internal errors are logged
// once here, with the request id, and the client sees only the id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := errs.CodeOf(err)
	msg := errs.MessageOf(err)
	status := http.StatusInternalServerError
	wireCode := "INTERNAL_ERROR"
	if we, ok := wireErrors[code]; ok {
		status, wireCode = we.status, we.code
	}
	for _, o := range apiWireErrors {
		if we, ok := o.codes[code]; ok && strings.HasPrefix(r.URL.Path, o.prefix) {
			status, wireCode = we.status, we.code
		}
	}
	if errors.Is(err, errBodyTooLarge) {
		status, wireCode = http.StatusRequestEntityTooLarge, "RESOURCE_LIMIT_EXCEEDED"
	}
	if re := (*routeError)(nil); errors.As(err, &re) {
		// The mlflow client falls back to older endpoints on
		// ENDPOINT_NOT_FOUND in a JSON body (a RestException), not on a
		// bare 404; it has no code of its own for a wrong method.
		status, wireCode, msg = re.status, "ENDPOINT_NOT_FOUND", re.msg
	}
	if errors.Is(err, errRange) {
		status = http.StatusRequestedRangeNotSatisfiable
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody reads this response.
		status, wireCode, msg = 499, "CANCELLED", "request cancelled"
	}
	rid := RequestIDFromContext(r.Context())
	switch {
	case status >= 500 && status != http.StatusInsufficientStorage:
		s.log.Error("request failed", "request_id", rid, "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
		if code == errs.Internal {
			msg = "internal error (request id " + rid + ")"
		}
	default:
		s.log.Debug("request refused", "request_id", rid, "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
	}
	var e *errs.Error
	if errors.As(err, &e) && e.Hint != "" && code != errs.Internal {
		msg += " (" + e.Hint + ")"
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	// The web UI's requests (X-Requested-With, as its fetches send) get no
	// challenge: a browser would answer it with its own Basic sign-in
	// dialog instead of letting the UI show its login page.
	if status == http.StatusUnauthorized && r.Header.Get("X-Requested-With") != "XMLHttpRequest" {
		w.Header().Set("WWW-Authenticate", `Basic realm="sextant"`)
	}
	body, _ := json.Marshal(struct {
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	}{wireCode, msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// headerTooLargeBody is the JSON error for a request line and headers
// over MaxHeaderBytes (see Listener): a client mistake, so a 431 the
// client does not retry, with the limit named.
func headerTooLargeBody() []byte {
	body, _ := json.Marshal(struct {
		ErrorCode string `json:"error_code"`
		Message   string `json:"message"`
	}{"RESOURCE_LIMIT_EXCEEDED", "The request line and headers are over " + strconv.Itoa(MaxHeaderBytes) + " bytes, the most the server reads: send long parameters in a POST body"})
	return body
}
