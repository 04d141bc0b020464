package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/wire"
)

// errBodyTooLarge is returned by the decoder when a body is over the limit;
// it is the one client error with its own status (413).
var errBodyTooLarge = errors.New("request body too large")

// writeError writes err as an MLflow error body, with the code and status
// of wire's error table. Internal errors are logged
// once here, with the request id, and the client sees only the id.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := errs.CodeOf(err)
	msg := errs.MessageOf(err)
	wireCode, status := wire.ErrorFor(code, r.URL.Path)
	if errors.Is(err, errBodyTooLarge) {
		status = http.StatusRequestEntityTooLarge // a LimitExceeded of its own status
	}
	if re := (*routeError)(nil); errors.As(err, &re) {
		// The mlflow client falls back to older endpoints on
		// ENDPOINT_NOT_FOUND in a JSON body (a RestException), not on a
		// bare 404; it has no code of its own for a wrong method.
		status, wireCode, msg = re.status, wire.EndpointNotFound, re.msg
	}
	if errors.Is(err, errRange) {
		status = http.StatusRequestedRangeNotSatisfiable
	}
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody reads this response.
		status, wireCode, msg = 499, wire.Cancelled, "request cancelled"
	}
	if b := bodyTooSlow(r); b != nil || errors.Is(err, errBodyTooSlow) {
		// Whatever the handler made of the failed read (a store wraps it,
		// the request's context is cancelled with it), the client was too
		// slow: a 408, which says so, and the connection closes.
		wireCode, _ = wire.ErrorFor(errs.Invalid, r.URL.Path)
		status = http.StatusRequestTimeout
		if b != nil {
			msg = b.message()
		}
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
	// The web UI's requests (X-Requested-With, as its fetches send) and a
	// browser's navigation get no challenge: a browser would answer it
	// with its own Basic sign-in dialog instead of letting the UI show its
	// login page, and a dialog that any page can raise by linking here
	// invites users to type their password into it.
	if status == http.StatusUnauthorized && r.Header.Get("X-Requested-With") != "XMLHttpRequest" && !browserNavigation(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="sextant"`)
	}
	body, _ := json.Marshal(wire.ErrorBody{ErrorCode: wireCode, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// headerTooLargeBody is the JSON error for a request line and headers
// over MaxHeaderBytes (see Listener): a client mistake, so a 431 the
// client does not retry, with the limit named.
func headerTooLargeBody() []byte {
	code, _ := wire.ErrorFor(errs.LimitExceeded, "")
	body, _ := json.Marshal(wire.ErrorBody{ErrorCode: code, Message: "The request line and headers are over " + strconv.Itoa(MaxHeaderBytes) + " bytes, the most the server reads: send long parameters in a POST body"})
	return body
}

// browserNavigation reports whether r is a browser loading a page (a link
// followed, an address typed, a frame): Sec-Fetch-Mode says so where the
// browser sends it, Accept asking for HTML elsewhere.
func browserNavigation(r *http.Request) bool {
	if m := r.Header.Get("Sec-Fetch-Mode"); m != "" {
		return m == "navigate" || m == "nested-navigate"
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// tooManyConnsBody is the JSON error for a connection over the cap of
// connections per client (see Listener): a 429, which clients retry
// after a pause.
func tooManyConnsBody(max int) []byte {
	code, _ := wire.ErrorFor(errs.Throttled, "")
	body, _ := json.Marshal(wire.ErrorBody{ErrorCode: code, Message: "Too many connections from this address: the server takes at most " + strconv.Itoa(max) + " from one client while it is busy (--max-conns-per-client); close idle ones or retry later"})
	return body
}
