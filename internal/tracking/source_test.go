package tracking

import "testing"

func TestAppendModelVersion(t *testing.T) {
	for _, tc := range []struct{ old, name, version, want string }{
		{"", "m", "1", `[{"name": "m", "version": 1}]`},
		{`[{"name": "m", "version": 1}]`, "m", "1", `[{"name": "m", "version": 1}]`},
		{`[{"name": "m", "version": 1}]`, "n", "2", `[{"name": "m", "version": 1}, {"name": "n", "version": 2}]`},
		// Python's json.dumps: ASCII only, surrogate pairs beyond the BMP.
		{"", "modèle \"x\"\n😀", "3", `[{"name": "mod\u00e8le \"x\"\n\ud83d\ude00", "version": 3}]`},
		{"not json", "m", "1", `[{"name": "m", "version": 1}]`},
	} {
		if got := appendModelVersion(tc.old, tc.name, tc.version); got != tc.want {
			t.Errorf("appendModelVersion(%q, %q, %q) = %s, want %s", tc.old, tc.name, tc.version, got, tc.want)
		}
	}
}

func TestCheckNoRelativePath(t *testing.T) {
	for src, ok := range map[string]bool{
		"s3://b/a/b": true, "runs:/r/model": true, "models:/m-1": true, "mlflow-artifacts:/1/r/artifacts/": true,
		"s3://b/a/../b": false, "s3://b/a/%2e%2e/b": false, "s3://b/a%252f..%252fb": false, "s3://b": false,
		"s3://b/a/./b": false, "s3://b/a%00": false, "models:m-1": false, "s3://b/a//b": true,
	} {
		if err := checkNoRelativePath(src); (err == nil) != ok {
			t.Errorf("checkNoRelativePath(%q) = %v, want ok %v", src, err, ok)
		}
	}
}

func TestCheckSourceHost(t *testing.T) {
	s := &Service{root: "mlflow-artifacts:"}
	for src, ok := range map[string]bool{
		"mlflow-artifacts:/1/x": true, "s3://b/x": true, "http://h/x": false, "HTTPS://h/x": false,
		"mlflow-artifacts://h/x": false, "sftp://h/x": false, "file:///x": true,
	} {
		if err := s.checkSourceHost(src); (err == nil) != ok {
			t.Errorf("checkSourceHost(%q) = %v, want ok %v", src, err, ok)
		}
	}
	// The host of the server's own artifact root is trusted, on its port.
	s.root = "https://store.example.com/artifacts"
	for src, ok := range map[string]bool{
		"https://store.example.com/artifacts/1": true, "https://store.example.com:443/x": true,
		"http://store.example.com/x": false, "https://other.example.com/x": false, "mlflow-artifacts://store.example.com/x": true,
	} {
		if err := s.checkSourceHost(src); (err == nil) != ok {
			t.Errorf("root %s: checkSourceHost(%q) = %v, want ok %v", s.root, src, err, ok)
		}
	}
}

func TestParseModelURI(t *testing.T) {
	for u, want := range map[string]modelURI{
		"models:/m-1": {modelID: "m-1"}, "models:/a/3": {name: "a", version: "3"}, "models:/a/Latest": {name: "a"},
		"models:/a/Staging": {name: "a", stage: "Staging"}, "models:/a@b@champ": {name: "a@b", alias: "champ"},
	} {
		if got, ok := parseModelURI(u); !ok || got != want {
			t.Errorf("parseModelURI(%q) = %+v, %v; want %+v", u, got, ok, want)
		}
	}
	for _, u := range []string{"models:/", "models:/a/b/c", "models:/a/ ", "models:/a@", "runs:/a", "models:a"} {
		if _, ok := parseModelURI(u); ok {
			t.Errorf("parseModelURI(%q) ok, want malformed", u)
		}
	}
}
