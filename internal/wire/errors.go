package wire

import (
	"strings"

	"github.com/sextant/sextant/internal/errs"
)

// ErrorBody is the body of every error answer, MLflow's shape.
type ErrorBody struct {
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

// The wire codes that do not stand for one errs.Code on the way out: the
// server writes them for conditions of the HTTP layer.
const (
	// EndpointNotFound answers a path or method no route serves, with 404
	// or 405: the mlflow client falls back to older endpoints on it.
	EndpointNotFound = "ENDPOINT_NOT_FOUND"
	// Cancelled goes with status 499 when the client went away; nobody
	// reads it.
	Cancelled = "CANCELLED"
)

// errorRow is how one errs.Code goes on the wire: the MLflow error code
// and HTTP status, for every path or, with prefix, for the paths under it
// (which then override the row for every path). A row with answer set is
// never written by ErrorFor: it is a code the server writes for something
// other than an errs.Code, or that other servers (MLflow's) send, which
// CodeFor reads back.
type errorRow struct {
	code   errs.Code
	wire   string
	status int
	prefix string
	answer bool
}

// errorTable is the one table of error codes and statuses, both ways:
// ErrorFor reads it forward for the server, CodeFor backward for the
// client (docs/reference/mlflow-api.md §4).
//
// The mlflow client retries 408, 429 and every 5xx for minutes, so a
// client mistake never maps to one of them; a limit breach is a 400 that
// names the limit, so the client fails at once with a useful message.
var errorTable = [...]errorRow{
	{code: errs.Invalid, wire: "INVALID_PARAMETER_VALUE", status: 400},
	{code: errs.LimitExceeded, wire: "RESOURCE_LIMIT_EXCEEDED", status: 400},
	{code: errs.NotFound, wire: "RESOURCE_DOES_NOT_EXIST", status: 404},
	{code: errs.AlreadyExists, wire: "RESOURCE_ALREADY_EXISTS", status: 400},
	{code: errs.Conflict, wire: "RESOURCE_CONFLICT", status: 409},
	{code: errs.Unauthenticated, wire: "UNAUTHENTICATED", status: 401},
	{code: errs.PermissionDenied, wire: "PERMISSION_DENIED", status: 403},
	{code: errs.Throttled, wire: "REQUEST_LIMIT_EXCEEDED", status: 429},
	{code: errs.Unavailable, wire: "TEMPORARILY_UNAVAILABLE", status: 503},
	{code: errs.NotImplemented, wire: "NOT_IMPLEMENTED", status: 501},
	{code: errs.Internal, wire: "INTERNAL_ERROR", status: 500},
	// A full disk is the server's problem, but retrying will not help
	// soon: 507 is not among the statuses the client retries.
	{code: errs.InsufficientStorage, wire: "RESOURCE_EXHAUSTED", status: 507},
	// A condition of the request (If-Unmodified-Since) does not hold.
	{code: errs.PreconditionFailed, wire: "PRECONDITION_FAILED", status: 412},

	// The APIs that follow Databricks' conventions rather than MLflow's:
	// the Files API answers a file that exists (overwrite=false) with 409
	// ALREADY_EXISTS and a missing one with 404 NOT_FOUND; Unity Catalog
	// answers duplicates with 409. The Databricks SDKs map 409 to
	// ResourceConflict/AlreadyExists.
	{code: errs.AlreadyExists, wire: "ALREADY_EXISTS", status: 409, prefix: "/api/2.0/fs/"},
	{code: errs.NotFound, wire: "NOT_FOUND", status: 404, prefix: "/api/2.0/fs/"},
	{code: errs.AlreadyExists, wire: "RESOURCE_ALREADY_EXISTS", status: 409, prefix: "/api/2.1/unity-catalog/"},

	// Read back only.
	{code: errs.NotFound, wire: EndpointNotFound, status: 404, answer: true},
	{code: errs.LimitExceeded, wire: "RESOURCE_LIMIT_EXCEEDED", status: 413, answer: true}, // a body over the size limit
	{code: errs.LimitExceeded, wire: "RESOURCE_LIMIT_EXCEEDED", status: 431, answer: true}, // a request line over the limit
	{code: errs.Invalid, wire: "BAD_REQUEST", status: 400, answer: true},                   // MLflow's server
	{code: errs.Unavailable, wire: Cancelled, status: 499, answer: true},
}

// ErrorFor returns the wire code and HTTP status of an error with code
// answering a request for path; an unknown code is INTERNAL_ERROR, 500.
func ErrorFor(code errs.Code, path string) (wireCode string, status int) {
	wireCode, status = "INTERNAL_ERROR", 500
	found := false
	for _, r := range errorTable {
		switch {
		case r.answer || r.code != code:
		case r.prefix == "" && !found:
			wireCode, status, found = r.wire, r.status, true
		case r.prefix != "" && strings.HasPrefix(path, r.prefix):
			return r.wire, r.status
		}
	}
	return wireCode, status
}

// CodeFor returns the errs.Code of an error answer: 429 is
// errs.Throttled and any other 5xx but 501 and 507 errs.Unavailable
// (retrying may help, whatever the body says: a proxy may have answered);
// otherwise the code the table gives wireCode, or failing that the status
// (errs.Invalid for a status the table does not have).
func CodeFor(wireCode string, status int) errs.Code {
	switch {
	case status == 429:
		return errs.Throttled
	case status >= 500 && status != 501 && status != 507:
		return errs.Unavailable
	}
	if wireCode != "" {
		for _, r := range errorTable {
			if r.wire == wireCode {
				return r.code
			}
		}
	}
	for _, r := range errorTable {
		if r.status == status && r.prefix == "" {
			return r.code
		}
	}
	return errs.Invalid
}
