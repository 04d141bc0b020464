package httpapi_test

import (
	"testing"
)

// TestDownloadHeaders: every download of user data (artifacts, workspace
// files, volume files) tells the browser not to sniff a type and to save
// it rather than render it in the server's origin.
func TestDownloadHeaders(t *testing.T) {
	a, f := volumeServer(t)
	a.must(owner, "PUT", "/api/2.0/fs/files/Workspace/Users/"+owner+"/page.html", "<script>alert(1)</script>")
	tests := map[string]struct {
		method, target, filename string
	}{
		"Artifact":      {"GET", "/api/2.0/mlflow-artifacts/artifacts/" + f.artifact, "a.txt"},
		"WorkspaceFile": {"GET", "/api/2.0/fs/files/Workspace/Users/" + owner + "/page.html", "page.html"},
		"WorkspaceHead": {"HEAD", "/api/2.0/fs/files/Workspace/Users/" + owner + "/page.html", "page.html"},
		"VolumeFile":    {"GET", "/api/2.0/fs/files" + f.volumePath() + "/data.bin", "data.bin"},
		"VolumeHead":    {"HEAD", "/api/2.0/fs/files" + f.volumePath() + "/data.bin", "data.bin"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := a.as(owner, tt.method, tt.target, nil)
			if r.status != 200 {
				t.Fatalf("%s %s: %d %s", tt.method, tt.target, r.status, r.raw)
			}
			if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			if got, want := r.header.Get("Content-Disposition"), `attachment; filename=`+tt.filename; got != want {
				t.Errorf("Content-Disposition %q, want %q", got, want)
			}
		})
	}
}
