package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// startArtifactUpload starts a multipart upload of big.bin into the run's
// artifacts as user and returns the URL and token of its first part.
func startArtifactUpload(t *testing.T, a *authServer, f fixture, user string) (partURL, token string) {
	t.Helper()
	r := a.must(user, "POST", "/api/2.0/mlflow-artifacts/mpu/create/"+f.exp+"/"+f.run+"/artifacts", map[string]any{"path": "/tmp/big.bin", "num_parts": 1})
	cred := r.body["credentials"].([]any)[0].(map[string]any)
	u, err := url.Parse(cred["url"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return u.RequestURI(), cred["headers"].(map[string]any)["X-Sextant-Upload-Token"].(string)
}

// putPart sends a part as the mlflow client does: no credentials, the
// token in its header.
func putPart(a *authServer, target, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("PUT", target, strings.NewReader("part"))
	req.Header.Set("X-Sextant-Upload-Token", token)
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return rec
}

// TestPartTokensFollowTheUsersRights: a part token names the user who
// started the upload, and each part checks that user again: once the
// experiment's grant is taken away, or the user is disabled, the parts of
// an upload already started are refused (as missing, 404, once the user
// may not even read the experiment or volume; 403 once disabled).
func TestPartTokensFollowTheUsersRights(t *testing.T) {
	a := mustAuthServer(t)
	f := a.newFixture()

	target, token := startArtifactUpload(t, a, f, editor)
	if rec := putPart(a, target, token); rec.Code != 200 || rec.Header().Get("ETag") == "" {
		t.Fatalf("part with a fresh token: %d %s", rec.Code, rec.Body)
	}
	a.must(owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:" + f.exp, "principal": editor, "level": "NO_PERMISSIONS"})
	if rec := putPart(a, target, token); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "RESOURCE_DOES_NOT_EXIST") {
		t.Fatalf("part after the grant was taken away: %d %s", rec.Code, rec.Body)
	}
	a.must(owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "experiment:" + f.exp, "principal": editor, "level": "CAN_EDIT"})
	if rec := putPart(a, target, token); rec.Code != 200 {
		t.Fatalf("part after the grant came back: %d %s", rec.Code, rec.Body)
	}

	a.must(admin, "PATCH", "/api/2.0/sextant/users", map[string]any{"email": editor, "disabled": true})
	if rec := putPart(a, target, token); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "disabled") {
		t.Fatalf("part after the user was disabled: %d %s", rec.Code, rec.Body)
	}

	// A token is for its upload only, and cannot be edited to name
	// someone else.
	target2, token2 := startArtifactUpload(t, a, f, owner)
	fields := strings.Split(token2, ".") // v2, user, expiry, signature
	other := append([]string(nil), fields...)
	other[1] = "999"
	later := append([]string(nil), fields...)
	later[2] = "9" + later[2]
	for name, tok := range map[string]string{
		"ErrOtherUpload": token,
		"ErrOtherUser":   strings.Join(other, "."),
		"ErrLater":       strings.Join(later, "."),
		"ErrEmpty":       "",
		"ErrOldShape":    token2[strings.LastIndexByte(token2, '.')+1:],
	} {
		if rec := putPart(a, target2, tok); rec.Code != http.StatusForbidden {
			t.Errorf("%s: %d %s", name, rec.Code, rec.Body)
		}
	}
	if rec := putPart(a, target2, token2); rec.Code != 200 {
		t.Fatalf("the owner's part: %d %s", rec.Code, rec.Body)
	}
}

// TestVolumeUploadsFollowTheUsersRights: the parts of a volume's multipart
// upload stop once the user loses CAN_EDIT on the volume or is disabled,
// and another user cannot continue it with its session token.
func TestVolumeUploadsFollowTheUsersRights(t *testing.T) {
	a, f := volumeServer(t)
	files := "/api/2.0/fs/files" + f.volumePath()
	r := a.must(editor, "POST", files+"/big.bin?action=initiate-upload", nil)
	tok := r.body["multipart_upload"].(map[string]any)["session_token"].(string)
	part := func(user string) response {
		return a.as(user, "PUT", files+"/big.bin?upload_type=multipart&session_token="+url.QueryEscape(tok)+"&part_number=1", "part")
	}
	if r := part(editor); r.status != 200 {
		t.Fatalf("part: %d %s", r.status, r.raw)
	}
	if r := part(owner); r.status != 403 || !strings.Contains(r.raw, "another user") {
		t.Fatalf("the owner continuing the editor's upload: %d %s", r.status, r.raw)
	}
	a.must(owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "volume:" + f.volume, "principal": editor, "level": "NO_PERMISSIONS"})
	if r := part(editor); r.status != 404 {
		t.Fatalf("part after the grant was taken away: %d %s", r.status, r.raw)
	}
	a.must(owner, "PUT", "/api/2.0/sextant/permissions", map[string]any{"resource": "volume:" + f.volume, "principal": editor, "level": "CAN_EDIT"})
	if r := part(editor); r.status != 200 {
		t.Fatalf("part after the grant came back: %d %s", r.status, r.raw)
	}
	a.must(admin, "PATCH", "/api/2.0/sextant/users", map[string]any{"email": editor, "disabled": true})
	if r := part(editor); r.status != 401 && r.status != 403 {
		t.Fatalf("part after the user was disabled: %d %s", r.status, r.raw)
	}
}
