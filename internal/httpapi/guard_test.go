package httpapi

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGuardedWriterReadFrom: io.Copy into a guarded response (which takes
// the ReadFrom path, so files go out with sendfile) still refuses to send
// the body of a route that did not check its resource.
func TestGuardedWriterReadFrom(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for _, checked := range []bool{false, true} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/2.0/mlflow-artifacts/artifacts/x", nil)
		w := &guardedWriter{ResponseWriter: &statusWriter{ResponseWriter: rec}, g: &guard{checked: checked}, s: s, r: r}
		n, err := io.Copy(w, strings.NewReader("secret bytes"))
		if err != nil || n != int64(len("secret bytes")) {
			t.Fatalf("checked=%v: copied %d, %v", checked, n, err)
		}
		body := rec.Body.String()
		switch {
		case checked && (rec.Code != 200 || body != "secret bytes"):
			t.Errorf("checked route: %d %q", rec.Code, body)
		case !checked && (rec.Code != 500 || strings.Contains(body, "secret")):
			t.Errorf("unchecked route: %d %q, want a 500 without the body", rec.Code, body)
		}
	}
}
