package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// volumeServer is the permission tests' server with one fixture: volume
// f.volume holding data.bin ("0123456789").
func volumeServer(t *testing.T) (*authServer, fixture) {
	a := mustAuthServer(t)
	return a, a.newFixture()
}

func TestVolumeFilesWire(t *testing.T) {
	a, f := volumeServer(t)
	files, dirs := "/api/2.0/fs/files"+f.volumePath(), "/api/2.0/fs/directories"+f.volumePath()

	res := a.as(owner, "GET", files+"/data.bin", nil)
	if res.status != 200 || res.raw != "0123456789" || res.header.Get("Content-Type") != "application/octet-stream" ||
		res.header.Get("Content-Length") != "10" || res.header.Get("Last-Modified") == "" || res.header.Get("ETag") == "" {
		t.Fatalf("GET: %d %q %v", res.status, res.raw, res.header)
	}
	lastMod := res.header.Get("Last-Modified")

	tests := map[string]struct {
		method, target string
		headers        map[string]string
		status         int
		body           string // exact body, or error_code for errors
		header         map[string]string
	}{
		"RangeClosed":        {"GET", files + "/data.bin", map[string]string{"Range": "bytes=2-4"}, 206, "234", map[string]string{"Content-Range": "bytes 2-4/10", "Content-Length": "3"}},
		"RangeOpen":          {"GET", files + "/data.bin", map[string]string{"Range": "bytes=7-"}, 206, "789", map[string]string{"Content-Range": "bytes 7-9/10"}},
		"RangeSuffix":        {"GET", files + "/data.bin", map[string]string{"Range": "bytes=-2"}, 206, "89", nil},
		"ErrRangePastEnd":    {"GET", files + "/data.bin", map[string]string{"Range": "bytes=10-"}, 416, "INVALID_PARAMETER_VALUE", map[string]string{"Content-Range": "bytes */10"}},
		"UnmodifiedSinceOK":  {"GET", files + "/data.bin", map[string]string{"If-Unmodified-Since": lastMod}, 200, "0123456789", nil},
		"ErrModifiedSince":   {"GET", files + "/data.bin", map[string]string{"If-Unmodified-Since": "Mon, 02 Jan 2006 15:04:05 GMT"}, 412, "PRECONDITION_FAILED", nil},
		"Head":               {"HEAD", files + "/data.bin", nil, 200, "", map[string]string{"Content-Length": "10", "Content-Type": "application/octet-stream"}},
		"ErrHeadMissing":     {"HEAD", files + "/nope", nil, 404, "NOT_FOUND", nil},
		"ErrGetMissing":      {"GET", files + "/nope", nil, 404, "NOT_FOUND", nil},
		"ErrGetDirectory":    {"GET", files, nil, 404, "NOT_FOUND", nil},
		"ErrNoOverwrite":     {"PUT", files + "/data.bin?overwrite=false", nil, 409, "ALREADY_EXISTS", nil},
		"ErrOverwriteValue":  {"PUT", files + "/data.bin?overwrite=maybe", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrUnknownParam":    {"GET", files + "/data.bin?offset=3", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrOutsideVolume":   {"PUT", "/api/2.0/fs/files/Volumes/" + f.catalog + "/team", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrDotDot":          {"PUT", files + "/a/../../other/x", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrEncodedDotDot":   {"PUT", files + "/a/%2e%2e/%2E%2E/x", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrEncodedSlash":    {"PUT", files + "/a%2F..%2F..%2Fx", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrEmptySegment":    {"PUT", files + "//x", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrBackslash":       {"PUT", files + "/a%5C..%5Cx", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrNUL":             {"PUT", files + "/a%00b", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrReservedName":    {"PUT", files + "/.sextant-dir", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrMissingVolume":   {"GET", "/api/2.0/fs/files/Volumes/" + f.catalog + "/team/nope/x", nil, 404, "NOT_FOUND", nil},
		"ErrFileOverDir":     {"PUT", files, nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrDeleteRoot":      {"DELETE", dirs, nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrListMissing":     {"GET", dirs + "/nope", nil, 404, "NOT_FOUND", nil},
		"ErrHeadDirOfFile":   {"HEAD", dirs + "/data.bin", nil, 404, "NOT_FOUND", nil},
		"HeadRoot":           {"HEAD", dirs, nil, 200, "", nil},
		"ErrPageSize":        {"GET", dirs + "?page_size=-1", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrPageToken":       {"GET", dirs + "?page_token=%21%21", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrCatalogName":     {"GET", "/api/2.1/unity-catalog/catalogs/bad.name", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrVolumeFullName":  {"GET", "/api/2.1/unity-catalog/volumes/" + f.catalog + ".team", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrDeleteNonEmpty":  {"DELETE", "/api/2.1/unity-catalog/schemas/" + f.schema, nil, 409, "RESOURCE_CONFLICT", nil},
		"ErrListNoCatalog":   {"GET", "/api/2.1/unity-catalog/schemas", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrMissingCatalog":  {"GET", "/api/2.1/unity-catalog/catalogs/nope", nil, 404, "RESOURCE_DOES_NOT_EXIST", nil},
		"ErrBadMaxResults":   {"GET", "/api/2.1/unity-catalog/catalogs?max_results=x", nil, 400, "INVALID_PARAMETER_VALUE", nil},
		"ErrNegativeResults": {"GET", "/api/2.1/unity-catalog/catalogs?max_results=-1", nil, 400, "INVALID_PARAMETER_VALUE", nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.target, strings.NewReader(""))
			req.SetBasicAuth(owner, password)
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			a.h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.target, rec.Code, rec.Body.String(), tt.status)
			}
			body := rec.Body.String()
			if tt.status >= 400 && tt.method != "HEAD" {
				if !strings.Contains(body, `"error_code":"`+tt.body+`"`) || !strings.Contains(body, `"message":"`) {
					t.Fatalf("body %s, want error_code %s and a message", body, tt.body)
				}
			} else if tt.method != "HEAD" && body != tt.body {
				t.Fatalf("body %q, want %q", body, tt.body)
			}
			for k, v := range tt.header {
				if got := rec.Header().Get(k); got != v {
					t.Fatalf("header %s: %q, want %q", k, got, v)
				}
			}
		})
	}
	// Nothing was written by the refused requests.
	res = a.must(owner, "GET", dirs, nil)
	if c := res.body["contents"].([]any); len(c) != 1 || c[0].(map[string]any)["name"] != "data.bin" {
		t.Fatalf("volume holds %s", res.raw)
	}
}

func TestVolumeDirectoriesWire(t *testing.T) {
	a, f := volumeServer(t)
	files, dirs := "/api/2.0/fs/files"+f.volumePath(), "/api/2.0/fs/directories"+f.volumePath()
	if res := a.as(editor, "PUT", dirs+"/a/b/c", nil); res.status != http.StatusNoContent {
		t.Fatalf("mkdir -p: %d %s", res.status, res.raw)
	}
	if res := a.as(editor, "PUT", dirs+"/a/b", nil); res.status != http.StatusNoContent {
		t.Fatalf("mkdir again: %d %s", res.status, res.raw)
	}
	for _, name := range []string{"x1", "x2", "x3"} {
		if res := a.as(editor, "PUT", files+"/a/"+name, "v"); res.status != http.StatusNoContent {
			t.Fatalf("put: %d %s", res.status, res.raw)
		}
	}
	var names []string
	target := dirs + "/a?page_size=2"
	for range 5 {
		res := a.must(reader, "GET", target, nil)
		for _, e := range res.body["contents"].([]any) {
			m := e.(map[string]any)
			names = append(names, m["name"].(string))
			if m["path"] != f.volumePath()+"/a/"+m["name"].(string) {
				t.Fatalf("path %v", m["path"])
			}
			if m["is_directory"] == true {
				if _, ok := m["file_size"]; ok {
					t.Fatalf("a directory with a file_size: %v", m)
				}
			} else if m["file_size"] != float64(1) || m["last_modified"].(float64) < float64(time.Now().Add(-time.Hour).UnixMilli()) {
				t.Fatalf("file entry %v", m)
			}
		}
		tok, _ := res.body["next_page_token"].(string)
		if tok == "" {
			break
		}
		target = dirs + "/a?page_size=2&page_token=" + tok
	}
	if strings.Join(names, ",") != "b,x1,x2,x3" {
		t.Fatalf("listing %v", names)
	}
	if res := a.as(editor, "DELETE", dirs+"/a/b", nil); res.status != http.StatusConflict || res.body["error_code"] != "RESOURCE_CONFLICT" {
		t.Fatalf("delete a non-empty dir: %d %s", res.status, res.raw)
	}
	for _, d := range []string{"/a/b/c", "/a/b"} {
		if res := a.as(editor, "DELETE", dirs+d, nil); res.status != http.StatusNoContent {
			t.Fatalf("delete %s: %d %s", d, res.status, res.raw)
		}
	}
	if res := a.as(reader, "HEAD", dirs+"/a/b", nil); res.status != http.StatusNotFound {
		t.Fatalf("head deleted dir: %d", res.status)
	}
	if res := a.as(editor, "PUT", files+"/a/x1/y", "v"); res.status != http.StatusConflict {
		t.Fatalf("file under a file: %d %s", res.status, res.raw)
	}
}

func TestUnityCatalogWire(t *testing.T) {
	a, f := volumeServer(t)
	uc := "/api/2.1/unity-catalog"
	res := a.must(reader, "GET", uc+"/volumes/"+strings.ToUpper(f.volume), nil)
	for k, want := range map[string]any{"name": "ckpt", "catalog_name": f.catalog, "schema_name": "team", "full_name": f.volume, "volume_type": "MANAGED", "owner": owner} {
		if res.body[k] != want {
			t.Fatalf("volume %s = %v, want %v (%s)", k, res.body[k], want, res.raw)
		}
	}
	if id, _ := res.body["volume_id"].(string); len(id) != 32 {
		t.Fatalf("volume_id %v", res.body["volume_id"])
	}
	if res := a.as(owner, "POST", uc+"/volumes", map[string]any{"catalog_name": f.catalog, "schema_name": "team", "name": "ckpt"}); res.status != http.StatusConflict || res.body["error_code"] != "RESOURCE_ALREADY_EXISTS" {
		t.Fatalf("duplicate volume: %d %s", res.status, res.raw)
	}
	if res := a.as(owner, "POST", uc+"/volumes", map[string]any{"catalog_name": f.catalog, "schema_name": "team", "name": "ext", "volume_type": "EXTERNAL", "storage_location": "s3://b/x"}); res.status != 400 || !strings.Contains(res.raw, "not supported") {
		t.Fatalf("external volume: %d %s", res.status, res.raw)
	}
	for i := range 3 {
		a.must(owner, "POST", uc+"/volumes", map[string]any{"catalog_name": f.catalog, "schema_name": "team", "name": "v" + string(rune('a'+i))})
	}
	var got []string
	target := uc + "/volumes?catalog_name=" + f.catalog + "&schema_name=team&max_results=3"
	for range 4 {
		res := a.must(owner, "GET", target, nil)
		for _, v := range res.body["volumes"].([]any) {
			got = append(got, v.(map[string]any)["name"].(string))
		}
		tok, _ := res.body["next_page_token"].(string)
		if tok == "" {
			break
		}
		target = uc + "/volumes?catalog_name=" + f.catalog + "&schema_name=team&max_results=3&page_token=" + tok
	}
	if strings.Join(got, ",") != "ckpt,va,vb,vc" {
		t.Fatalf("volumes %v", got)
	}
	// The reader's grant on one volume shows them that volume only.
	res = a.must(reader, "GET", uc+"/volumes?catalog_name="+f.catalog+"&schema_name=team", nil)
	if v := res.body["volumes"].([]any); len(v) != 1 {
		t.Fatalf("reader sees %s", res.raw)
	}
	// Deleting a volume deletes its files; a new one of the same name is empty.
	a.must(owner, "DELETE", uc+"/volumes/"+f.volume, nil)
	if res := a.as(owner, "GET", "/api/2.0/fs/files"+f.volumePath()+"/data.bin", nil); res.status != 404 {
		t.Fatalf("file of a deleted volume: %d", res.status)
	}
	a.must(owner, "POST", uc+"/volumes", map[string]any{"catalog_name": f.catalog, "schema_name": "team", "name": "ckpt"})
	if res := a.as(owner, "GET", "/api/2.0/fs/files"+f.volumePath()+"/data.bin", nil); res.status != 404 {
		t.Fatalf("file in a recreated volume: %d", res.status)
	}
	if res := a.as(reader, "GET", uc+"/volumes/"+f.volume, nil); res.status != 404 {
		t.Fatalf("the old grant reaches the new volume: %d", res.status)
	}
}

// TestVolumeMultipartUpload walks the Files API multipart flow the
// Databricks SDK uses: initiate, parts out of order, a refused complete
// that leaves the upload open, complete, and the errors around it.
func TestVolumeMultipartUpload(t *testing.T) {
	a, f := volumeServer(t)
	files := "/api/2.0/fs/files" + f.volumePath()
	if r := a.as(editor, "GET", "/api/2.0/fs/endpoints", nil); r.status != 200 || !strings.Contains(r.raw, `"api":"FILES_API","api_version":"2.0"`) || !strings.Contains(r.raw, `"multipart_upload_supported":true`) {
		t.Fatalf("endpoints: %d %s", r.status, r.raw)
	}
	initiate := func(path string) string {
		t.Helper()
		r := a.as(editor, "POST", files+path+"?action=initiate-upload", nil)
		mu, _ := r.body["multipart_upload"].(map[string]any)
		tok, _ := mu["session_token"].(string)
		if r.status != 200 || tok == "" {
			t.Fatalf("initiate %s: %d %s", path, r.status, r.raw)
		}
		return tok
	}
	tok := initiate("/step_1/big.distcp")
	part1 := strings.Repeat("a", 5<<20)
	part2 := "tail"
	putTo := func(path, tok string, n int, body string) response {
		t.Helper()
		return a.as(editor, "PUT", files+path+"?upload_type=multipart&session_token="+tok+"&part_number="+strconv.Itoa(n), body)
	}
	put := func(tok string, n int, body string) response { return putTo("/step_1/big.distcp", tok, n, body) }
	r2 := put(tok, 2, part2)
	r1 := put(tok, 1, part1)
	if r1.status != 200 || r2.status != 200 || r1.header.Get("ETag") == "" || r2.header.Get("ETag") == "" {
		t.Fatalf("parts: %d %s / %d %s", r1.status, r1.raw, r2.status, r2.raw)
	}
	complete := func(tok string, parts ...any) response {
		t.Helper()
		return a.as(editor, "POST", files+"/step_1/big.distcp?action=complete-upload&upload_type=multipart&session_token="+tok, map[string]any{"parts": parts})
	}
	part := func(n int, etag string) map[string]any { return map[string]any{"part_number": n, "etag": etag} }

	// While the upload is open, a .metadata beside it waits.
	if r := a.as(editor, "PUT", files+"/step_1/.metadata", "meta"); r.status != 409 || r.body["error_code"] != "RESOURCE_CONFLICT" {
		t.Fatalf(".metadata during a multipart upload: %d %s", r.status, r.raw)
	}
	if r := complete(tok, part(1, r1.header.Get("ETag")), part(2, "wrong")); r.status != 400 {
		t.Fatalf("complete with a wrong ETag: %d %s", r.status, r.raw)
	}
	if r := a.as(editor, "GET", files+"/step_1/big.distcp", nil); r.status != 404 {
		t.Fatalf("the file is visible before complete: %d", r.status)
	}
	if r := complete(tok, part(1, r1.header.Get("ETag")), part(2, r2.header.Get("ETag"))); r.status != 200 {
		t.Fatalf("complete: %d %s", r.status, r.raw)
	}
	if r := a.as(editor, "GET", files+"/step_1/big.distcp", nil); r.status != 200 || r.raw != part1+part2 {
		t.Fatalf("GET after complete: %d, %d bytes", r.status, len(r.raw))
	}
	if r := a.as(editor, "PUT", files+"/step_1/.metadata", "meta"); r.status != 204 {
		t.Fatalf(".metadata after complete: %d %s", r.status, r.raw)
	}
	// The session is over.
	if r := put(tok, 3, "x"); r.status != 404 || r.body["error_code"] != "NOT_FOUND" {
		t.Fatalf("part after complete: %d %s", r.status, r.raw)
	}

	// Abort drops the upload.
	tok = initiate("/gone.bin")
	if r := putTo("/gone.bin", tok, 1, "x"); r.status != 200 {
		t.Fatalf("part: %d %s", r.status, r.raw)
	}
	if r := a.as(editor, "POST", files+"/gone.bin?action=abort-upload&upload_type=multipart&session_token="+tok, nil); r.status != 200 {
		t.Fatalf("abort: %d %s", r.status, r.raw)
	}
	if r := putTo("/gone.bin", tok, 1, "x"); r.status != 404 {
		t.Fatalf("part after abort: %d %s", r.status, r.raw)
	}

	for name, c := range map[string]struct {
		user, method, target string
		body                 any
		status               int
		code                 string
	}{
		"ErrNoOverwrite":     {editor, "POST", files + "/data.bin?action=initiate-upload&overwrite=false", nil, 409, "ALREADY_EXISTS"},
		"ErrReaderInitiates": {reader, "POST", files + "/x.bin?action=initiate-upload", nil, 403, "PERMISSION_DENIED"},
		"ErrUnknownAction":   {editor, "POST", files + "/x.bin?action=explode", nil, 400, "INVALID_PARAMETER_VALUE"},
		"ErrNoAction":        {editor, "POST", files + "/x.bin", nil, 400, "INVALID_PARAMETER_VALUE"},
		"ErrBadToken":        {editor, "PUT", files + "/x.bin?upload_type=multipart&session_token=nonsense&part_number=1", "x", 400, "INVALID_PARAMETER_VALUE"},
		"ErrNoToken":         {editor, "POST", files + "/x.bin?action=complete-upload&upload_type=multipart", map[string]any{"parts": []any{}}, 400, "INVALID_PARAMETER_VALUE"},
		"ErrPartZero":        {editor, "PUT", files + "/step_1/big.distcp?upload_type=multipart&session_token=" + tok + "&part_number=0", "x", 400, "INVALID_PARAMETER_VALUE"},
		"ErrUploadType":      {editor, "PUT", files + "/x.bin?upload_type=resumable&session_token=" + tok + "&part_number=1", "x", 400, "INVALID_PARAMETER_VALUE"},
		"ErrNoParts":         {editor, "POST", files + "/gone.bin?action=complete-upload&upload_type=multipart&session_token=" + tok, map[string]any{"parts": []any{}}, 400, "INVALID_PARAMETER_VALUE"},
		"ErrReaderPart":      {reader, "PUT", files + "/gone.bin?upload_type=multipart&session_token=" + tok + "&part_number=1", "x", 403, "PERMISSION_DENIED"},
	} {
		if r := a.as(c.user, c.method, c.target, c.body); r.status != c.status || r.body["error_code"] != c.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.raw, c.status, c.code)
		}
	}
}
