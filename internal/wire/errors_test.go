package wire

import (
	"testing"

	"github.com/sextant/sextant/internal/errs"
)

// TestErrorTableRoundTrip: every code the server writes reads back as the
// code it came from, on every API, except where the client's rule for 5xx
// answers decides (a retry may help).
func TestErrorTableRoundTrip(t *testing.T) {
	codes := []errs.Code{errs.Invalid, errs.LimitExceeded, errs.NotFound, errs.AlreadyExists, errs.Conflict,
		errs.Unauthenticated, errs.PermissionDenied, errs.Throttled, errs.Unavailable, errs.NotImplemented,
		errs.Internal, errs.InsufficientStorage, errs.PreconditionFailed}
	for _, path := range []string{"/api/2.0/mlflow/runs/get", "/api/2.0/fs/files/Volumes/a/b/c/x", "/api/2.1/unity-catalog/catalogs", "/api/2.0/sextant/users"} {
		for _, c := range codes {
			wc, st := ErrorFor(c, path)
			want := c
			if c == errs.Internal {
				want = errs.Unavailable
			}
			if got := CodeFor(wc, st); got != want {
				t.Errorf("%s on %s goes out as %s %d and reads back as %s", c, path, wc, st, got)
			}
		}
	}
}

func TestErrorFor(t *testing.T) {
	f := func(code errs.Code, path, wantCode string, wantStatus int) {
		t.Helper()
		if c, s := ErrorFor(code, path); c != wantCode || s != wantStatus {
			t.Errorf("ErrorFor(%s, %s) = %s %d, want %s %d", code, path, c, s, wantCode, wantStatus)
		}
	}
	f(errs.AlreadyExists, "/api/2.0/mlflow/experiments/create", "RESOURCE_ALREADY_EXISTS", 400)
	f(errs.AlreadyExists, "/api/2.0/fs/files/Workspace/x", "ALREADY_EXISTS", 409)
	f(errs.NotFound, "/api/2.0/fs/files/Workspace/x", "NOT_FOUND", 404)
	f(errs.NotFound, "/api/2.1/unity-catalog/catalogs/x", "RESOURCE_DOES_NOT_EXIST", 404)
	f(errs.AlreadyExists, "/api/2.1/unity-catalog/catalogs", "RESOURCE_ALREADY_EXISTS", 409)
	f(errs.LimitExceeded, "/api/2.0/mlflow/runs/log-batch", "RESOURCE_LIMIT_EXCEEDED", 400)
	f(errs.InsufficientStorage, "/", "RESOURCE_EXHAUSTED", 507)
	f(errs.Code("nonsense"), "/", "INTERNAL_ERROR", 500)
}

func TestCodeFor(t *testing.T) {
	f := func(wireCode string, status int, want errs.Code) {
		t.Helper()
		if got := CodeFor(wireCode, status); got != want {
			t.Errorf("CodeFor(%q, %d) = %s, want %s", wireCode, status, got, want)
		}
	}
	f("PRECONDITION_FAILED", 412, errs.PreconditionFailed) // the hand-kept table lacked it
	f("ALREADY_EXISTS", 409, errs.AlreadyExists)
	f("NOT_FOUND", 404, errs.NotFound)
	f(EndpointNotFound, 405, errs.NotFound)
	f("BAD_REQUEST", 400, errs.Invalid)
	f("RESOURCE_LIMIT_EXCEEDED", 413, errs.LimitExceeded)
	f("", 404, errs.NotFound)
	f("", 401, errs.Unauthenticated)
	f("", 403, errs.PermissionDenied)
	f("X", 400, errs.Invalid)
	f("", 418, errs.Invalid)
	f("INVALID_PARAMETER_VALUE", 502, errs.Unavailable)
	f("INTERNAL_ERROR", 500, errs.Unavailable)
	f("", 429, errs.Throttled)
	f("NOT_IMPLEMENTED", 501, errs.NotImplemented)
	f("RESOURCE_EXHAUSTED", 507, errs.InsufficientStorage)
}
