package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/httpapi"
)

func (a *authServer) raw(method, target, body string, hdr map[string]string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	var req *http.Request
	if body != "" {
		req = httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
	} else {
		req = httptest.NewRequest(method, target, nil)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec
}

func TestBearerTokensAndRevocation(t *testing.T) {
	a := mustAuthServer(t)
	res := a.must(reader, "POST", "/api/2.0/sextant/tokens", map[string]any{"name": "laptop"})
	tok := res.body["token"].(map[string]any)
	secret := tok["token"].(string)
	if !strings.HasPrefix(secret, "sxt_") {
		t.Fatalf("token %q", secret)
	}
	bearer := map[string]string{"Authorization": "Bearer " + secret}
	if rec := a.raw("GET", "/api/2.0/sextant/auth/whoami", "", bearer); rec.Code != 200 || !strings.Contains(rec.Body.String(), reader) {
		t.Fatalf("whoami with token: %d %s", rec.Code, rec.Body)
	}
	// The secret is never shown again.
	if list := a.must(reader, "GET", "/api/2.0/sextant/tokens", nil); strings.Contains(list.raw, secret) {
		t.Fatal("token list shows the secret")
	}
	// Another user cannot revoke it.
	if res := a.as(outsider, "DELETE", "/api/2.0/sextant/tokens", map[string]any{"id": tok["id"]}); res.status != 404 {
		t.Fatalf("outsider revoked a token: %d %s", res.status, res.raw)
	}
	a.must(reader, "DELETE", "/api/2.0/sextant/tokens", map[string]any{"id": tok["id"]})
	if rec := a.raw("GET", "/api/2.0/sextant/auth/whoami", "", bearer); rec.Code != 401 {
		t.Fatalf("revoked token still works: %d", rec.Code)
	}
	for _, bad := range []string{"Bearer sxt_" + strings.Repeat("0", 64), "Bearer nope", "Digest x", "Basic !!!"} {
		if rec := a.raw("GET", "/api/2.0/sextant/auth/whoami", "", map[string]string{"Authorization": bad}); rec.Code != 401 {
			t.Fatalf("%q: %d", bad, rec.Code)
		}
	}
}

func TestBasicAuthAndBruteForce(t *testing.T) {
	a := mustAuthServer(t)
	wrong := map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(editor+":wrong password"))}
	rec := a.raw("GET", "/api/2.0/sextant/auth/whoami", "", wrong)
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") == "" {
		t.Fatalf("wrong password: %d %v", rec.Code, rec.Header())
	}
	throttled := false
	for range 12 {
		rec = a.raw("GET", "/api/2.0/sextant/auth/whoami", "", wrong)
		if rec.Code == http.StatusTooManyRequests {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Fatal("repeated wrong passwords were never throttled")
	}
	if rec.Header().Get("Retry-After") == "" {
		t.Fatal("throttled without Retry-After")
	}
	// Sign-in through the login endpoint is throttled for that account too.
	if rec := a.raw("POST", "/api/2.0/sextant/auth/login", `{"email":"`+editor+`","password":"`+password+`"}`, nil); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("login during lockout: %d", rec.Code)
	}
	// Other accounts are unaffected.
	if res := a.as(reader, "GET", "/api/2.0/sextant/auth/whoami", nil); res.status != 200 {
		t.Fatalf("reader locked out too: %d", res.status)
	}
	// Disabled users are refused.
	a.must(admin, "PATCH", "/api/2.0/sextant/users", map[string]any{"email": reader, "disabled": true})
	if res := a.as(reader, "GET", "/api/2.0/sextant/auth/whoami", nil); res.status != 401 {
		t.Fatalf("disabled user: %d", res.status)
	}
}

func TestSessions(t *testing.T) {
	a := mustAuthServer(t)
	// A session id planted before login is worthless.
	planted := &http.Cookie{Name: httpapi.SessionCookie, Value: strings.Repeat("a", 64)}
	if rec := a.raw("GET", "/api/2.0/sextant/auth/whoami", "", nil, planted); rec.Code != 401 {
		t.Fatalf("planted session accepted: %d", rec.Code)
	}
	rec := a.raw("POST", "/api/2.0/sextant/auth/login", `{"email":"`+owner+`","password":"`+password+`"}`, nil, planted)
	if rec.Code != 200 {
		t.Fatalf("login: %d %s", rec.Code, rec.Body)
	}
	var sess *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if c.Name == httpapi.SessionCookie {
			sess = c
		}
	}
	if sess == nil || sess.Value == planted.Value || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie: %+v", sess)
	}
	csrf := strings.Split(strings.Split(rec.Body.String(), `"csrf_token":"`)[1], `"`)[0]
	if rec := a.raw("GET", "/api/2.0/sextant/auth/whoami", "", nil, sess); rec.Code != 200 || !strings.Contains(rec.Body.String(), owner) {
		t.Fatalf("whoami with session: %d", rec.Code)
	}
	// Changes need the CSRF token.
	body := `{"path": "/Users/` + owner + `/csrf"}`
	if rec := a.raw("POST", "/api/2.0/sextant/workspace/mkdirs", body, nil, sess); rec.Code != 403 {
		t.Fatalf("state change without CSRF token: %d", rec.Code)
	}
	if rec := a.raw("POST", "/api/2.0/sextant/workspace/mkdirs", body, map[string]string{httpapi.CSRFHeader: "wrong"}, sess); rec.Code != 403 {
		t.Fatalf("state change with a wrong CSRF token: %d", rec.Code)
	}
	if rec := a.raw("POST", "/api/2.0/sextant/workspace/mkdirs", body, map[string]string{httpapi.CSRFHeader: csrf}, sess); rec.Code != 200 {
		t.Fatalf("state change with the CSRF token: %d %s", rec.Code, rec.Body)
	}
	if rec := a.raw("POST", "/api/2.0/sextant/auth/logout", "{}", map[string]string{httpapi.CSRFHeader: csrf}, sess); rec.Code != 200 {
		t.Fatalf("logout: %d", rec.Code)
	}
	if rec := a.raw("GET", "/api/2.0/sextant/auth/whoami", "", nil, sess); rec.Code != 401 {
		t.Fatalf("session works after logout: %d", rec.Code)
	}
}

func TestWorkspacePaths(t *testing.T) {
	a := mustAuthServer(t)
	home := "/Users/" + owner
	a.must(owner, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": home + "/proj"})
	id := a.must(owner, "POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": "/Workspace" + home + "//proj/exp/"}).body["experiment_id"].(string)
	// /Workspace/Users/x and /Users/x name the same node; slashes collapse.
	res := a.must(owner, "GET", "/api/2.0/mlflow/experiments/get-by-name?experiment_name="+home+"/proj/exp", nil)
	if res.body["experiment"].(map[string]any)["experiment_id"] != id {
		t.Fatalf("get-by-name of the canonical path: %s", res.raw)
	}
	res = a.as(owner, "POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": home + "/proj/exp"})
	if res.status != 400 || res.body["error_code"] != "RESOURCE_ALREADY_EXISTS" {
		t.Fatalf("duplicate spelled differently: %d %s", res.status, res.raw)
	}
	tests := map[string]struct {
		name, code, contains string
	}{
		"ErrRelative":       {"my-experiment", "INVALID_PARAMETER_VALUE", "absolute"},
		"ErrDotDot":         {home + "/proj/../../" + outsider + "/x", "INVALID_PARAMETER_VALUE", ".."},
		"ErrMissingFolder":  {home + "/nope/exp", "RESOURCE_DOES_NOT_EXIST", home + "/nope"},
		"ErrOthersHome":     {"/Users/" + outsider + "/exp", "RESOURCE_DOES_NOT_EXIST", "/Users/" + outsider},
		"ErrTopLevel":       {"/exp", "INVALID_PARAMETER_VALUE", "inside a folder"},
		"ErrControlChar":    {home + "/proj/a\u0001b", "INVALID_PARAMETER_VALUE", "control"},
		"ErrDirectlyInUser": {"/Users/exp", "INVALID_PARAMETER_VALUE", "inside a folder"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := a.as(owner, "POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": tc.name})
			if res.body["error_code"] != tc.code || !strings.Contains(res.body["message"].(string), tc.contains) {
				t.Fatalf("%q: %d %s", tc.name, res.status, res.raw)
			}
		})
	}
	// /Shared is for everyone.
	a.must(outsider, "POST", "/api/2.0/sextant/workspace/mkdirs", map[string]any{"path": "/Shared/team"})
	a.must(reader, "POST", "/api/2.0/mlflow/experiments/create", map[string]any{"name": "/Shared/team/exp"})
	// Encoded traversal in the Files API never escapes.
	for _, target := range []string{
		"/api/2.0/fs/files/Workspace/Users/" + owner + "%2F..%2F" + outsider + "/x",
		"/api/2.0/fs/files/Workspace/Users/" + owner + "/../" + outsider + "/x",
		"/api/2.0/fs/files/Workspace//Users/" + outsider + "/x",
	} {
		res := a.as(owner, "PUT", target, "data")
		if res.status != 400 && res.status != 403 && res.status != 404 && res.status != 307 && res.status != 301 {
			t.Fatalf("%s: %d %s", target, res.status, res.raw)
		}
	}
	// Workspace files round-trip for those allowed.
	a.must(outsider, "PUT", "/api/2.0/fs/files/Workspace/Shared/team/env.yaml", "name: env")
	if res := a.as(reader, "GET", "/api/2.0/fs/files/Workspace/Shared/team/env.yaml", nil); res.status != 200 || res.raw != "name: env" {
		t.Fatalf("shared file: %d %q", res.status, res.raw)
	}
	a.must(owner, "PUT", "/api/2.0/fs/files/Workspace"+home+"/proj/private.py", "secret = 1")
	if res := a.as(outsider, "GET", "/api/2.0/fs/files/Workspace"+home+"/proj/private.py", nil); res.status != 404 {
		t.Fatalf("outsider read a private file: %d", res.status)
	}
}

func TestAuditLog(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()
	a.must(owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:" + f.exp, "principal": outsider, "level": "CAN_READ"})
	a.must(reader, "POST", "/api/2.0/sextant/tokens", map[string]any{"name": "t"})
	a.must(owner, "DELETE", "/api/2.0/sextant/comments", map[string]any{"id": f.comment})
	res := a.must(admin, "GET", "/api/2.0/sextant/audit", nil)
	for _, want := range []string{"permission.set", "token.create", "comment.delete", "user.create"} {
		if !strings.Contains(res.raw, want) {
			t.Errorf("audit log lacks %s: %s", want, res.raw)
		}
	}
}
