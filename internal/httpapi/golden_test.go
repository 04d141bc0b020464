package httpapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// The golden files of testdata/mlflow hold the MLflow JSON both ways: the
// requests the real mlflow client sends and the answers it accepted,
// recorded from the client by the e2e suite (tests/e2e/test_golden.py,
// SEXTANT_E2E_GOLDEN=record), one directory per mlflow version, with ids
// and timestamps normalised (tests/e2e/golden.py says how; normalizer
// below does the same).
//
//	go test ./internal/httpapi -run TestMLflowGolden -update
//
// rewrites the answers from the server after a deliberate change; the
// requests always come from the client.
var update = flag.Bool("update", false, "rewrite the answers in testdata/mlflow from the server")

type goldenFile struct {
	MLflow    string           `json:"mlflow"`
	Exchanges []goldenExchange `json:"exchanges"`
}

type goldenExchange struct {
	Method   string `json:"method"`
	Path     string `json:"path"`
	Query    string `json:"query"`
	Request  any    `json:"request"`
	Status   int    `json:"status"`
	Response any    `json:"response"`
}

// TestMLflowGolden replays every recorded request, in order, against a
// fresh server and checks that it answers what the mlflow client accepted:
// the same status and, normalised, the same JSON.
func TestMLflowGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "mlflow", "*", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden files under testdata/mlflow (%v): record them with tests/e2e/test_golden.py", err)
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(path), "testdata/mlflow/"), ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var g goldenFile
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber() // numbers go back as the client wrote them (2.0 stays 2.0)
			if err := dec.Decode(&g); err != nil {
				t.Fatal(err)
			}
			h := MustServer(t)
			n := newNormalizer()
			for i := range g.Exchanges {
				e := &g.Exchanges[i]
				method, target, body := n.request(e)
				req := httptest.NewRequest(method, target, bytes.NewReader(body))
				if body != nil {
					req.Header.Set("Content-Type", "application/json")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				n.learnJSON(body)
				n.learnJSON(rec.Body.Bytes())
				got := n.response(rec.Body.Bytes())
				if *update {
					e.Status, e.Response = rec.Code, got
					continue
				}
				if rec.Code != e.Status || !reflect.DeepEqual(got, e.Response) {
					g, _ := json.MarshalIndent(got, "", " ")
					w, _ := json.MarshalIndent(e.Response, "", " ")
					t.Fatalf("exchange %d: %s %s answered %d\n%s\nthe mlflow client got %d\n%s", i, e.Method, e.Path, rec.Code, g, e.Status, w)
				}
			}
			if *update {
				var buf bytes.Buffer
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", " ")
				// Maps, so that keys are sorted as the recorder sorts them.
				ex := make([]map[string]any, len(g.Exchanges))
				for i, e := range g.Exchanges {
					ex[i] = map[string]any{"method": e.Method, "path": e.Path, "query": e.Query, "request": e.Request, "status": e.Status, "response": e.Response}
				}
				if err := enc.Encode(map[string]any{"mlflow": g.MLflow, "exchanges": ex}); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// The keys whose values normalizer replaces, as tests/e2e/golden.py does.
var (
	goldenIDKeys   = map[string]bool{"run_id": true, "run_uuid": true, "model_id": true, "source_run_id": true}
	goldenTimeKeys = map[string]bool{"start_time": true, "end_time": true, "creation_time": true, "last_update_time": true,
		"creation_timestamp": true, "last_updated_timestamp": true, "timestamp": true, "last_updated_time": true,
		"creation_timestamp_ms": true, "last_updated_timestamp_ms": true}
	goldenIDShape     = regexp.MustCompile(`^(?:[0-9a-f]{32}|m-[0-9a-f]{32})$`)
	goldenPlaceholder = regexp.MustCompile(`<id:[0-9]+>`)
)

// normalizer maps the ids of a replay to the placeholders of a recording
// (numbered by first appearance, in document order) and gives the
// replay's requests growing times where the recording has "<time>".
type normalizer struct {
	ids    map[string]string // real id -> placeholder
	reals  map[string]string // placeholder -> real id
	timeMs int64
}

func newNormalizer() *normalizer {
	return &normalizer{ids: map[string]string{}, reals: map[string]string{}, timeMs: 1_700_000_000_000}
}

// learnJSON registers the ids of a JSON document in document order.
func (n *normalizer) learnJSON(b []byte) {
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	// keys[i] is the key being read at depth i ("" in arrays).
	var keys []string
	var inObject []bool
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				keys, inObject = append(keys, ""), append(inObject, true)
				expectKey = true
				continue
			case '[':
				keys, inObject = append(keys, ""), append(inObject, false)
				expectKey = false
				continue
			default:
				keys, inObject = keys[:len(keys)-1], inObject[:len(inObject)-1]
			}
		case string:
			if expectKey {
				keys[len(keys)-1] = v
				expectKey = false
				continue
			}
			if k := keys[len(keys)-1]; goldenIDKeys[k] && goldenIDShape.MatchString(v) && n.ids[v] == "" {
				ph := fmt.Sprintf("<id:%d>", len(n.ids)+1)
				n.ids[v], n.reals[ph] = ph, v
			}
		}
		// After a value, an object expects its next key.
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
}

// text replaces the ids in s by their placeholders.
func (n *normalizer) text(s string) string {
	for real, ph := range n.ids {
		s = strings.ReplaceAll(s, real, ph)
	}
	return s
}

// real replaces the placeholders in s by the replay's ids.
func (n *normalizer) real(s string) string {
	return goldenPlaceholder.ReplaceAllStringFunc(s, func(ph string) string {
		if r, ok := n.reals[ph]; ok {
			return r
		}
		return ph
	})
}

func (n *normalizer) nextTime() json.Number {
	n.timeMs += 1000
	return json.Number(fmt.Sprint(n.timeMs))
}

// request returns the replay of e's request: placeholders replaced by the
// replay's ids, "<time>" by growing times.
func (n *normalizer) request(e *goldenExchange) (method, target string, body []byte) {
	target = n.real(e.Path)
	if e.Query != "" {
		q, _ := url.ParseQuery(e.Query)
		// Keep the recorded order of the parameters.
		var parts []string
		for _, kv := range strings.Split(e.Query, "&") {
			k, _, _ := strings.Cut(kv, "=")
			k, _ = url.QueryUnescape(k)
			vals := q[k]
			if len(vals) == 0 {
				continue
			}
			v := vals[0]
			q[k] = vals[1:]
			if goldenTimeKeys[k] && v == "<time>" {
				v = string(n.nextTime())
			}
			parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(n.real(v)))
		}
		target += "?" + strings.Join(parts, "&")
	}
	if e.Request != nil {
		body, _ = json.Marshal(n.realValue(e.Request, ""))
	}
	return e.Method, target, body
}

func (n *normalizer) realValue(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, y := range x {
			out[k] = n.realValue(y, k)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = n.realValue(y, key)
		}
		return out
	case string:
		if goldenTimeKeys[key] && x == "<time>" {
			return n.nextTime()
		}
		return n.real(x)
	}
	return v
}

// response returns an answer normalised as the golden files are.
func (n *normalizer) response(b []byte) any {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil && err != io.EOF {
		return "not JSON: " + string(b)
	}
	return n.value(v, "")
}

func (n *normalizer) value(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, y := range x {
			out[k] = n.value(y, k)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = n.value(y, key)
		}
		return out
	case nil, bool:
		return v
	}
	if goldenTimeKeys[key] {
		return "<time>"
	}
	if s, ok := v.(string); ok {
		return n.text(s)
	}
	return v
}
