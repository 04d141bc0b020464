package wire

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sextant/sextant/internal/runlogs"
)

func TestAppendLogAppend(t *testing.T) {
	b := runlogs.Batch{Source: "n0-x", FirstSeq: 5, Lines: []runlogs.Line{
		{TimestampMs: 1, Stream: runlogs.Stdout, Node: 1, LocalRank: -1, Text: "a\"\\\x1b[0m\t\r\x00é"},
		{TimestampMs: 2, Stream: runlogs.Stderr, Node: 2, LocalRank: 3, Flags: runlogs.FlagPartial | runlogs.FlagCR, Text: "bad \xff utf8"},
	}}
	var out struct {
		RunID     string `json:"run_id"`
		Source    string `json:"source"`
		FirstSeq  int64  `json:"first_seq"`
		Node      int    `json:"node"`
		LocalRank int    `json:"local_rank"`
		Lines     []struct {
			Timestamp int64  `json:"timestamp"`
			Stream    string `json:"stream"`
			Text      string `json:"text"`
			Node      *int   `json:"node"`
			LocalRank *int   `json:"local_rank"`
			Partial   bool   `json:"partial"`
			CR        bool   `json:"cr"`
		} `json:"lines"`
	}
	body := AppendLogAppend(nil, "run1", b)
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if out.RunID != "run1" || out.Source != "n0-x" || out.FirstSeq != 5 || out.Node != 1 || out.LocalRank != -1 || len(out.Lines) != 2 {
		t.Fatalf("decoded %+v", out)
	}
	l0, l1 := out.Lines[0], out.Lines[1]
	if l0.Text != b.Lines[0].Text || l0.Node != nil || l0.Partial || l0.CR {
		t.Fatalf("line 0 %+v", l0)
	}
	if l1.Text != "bad \uFFFD utf8" || *l1.Node != 2 || *l1.LocalRank != 3 || !l1.Partial || !l1.CR || l1.Stream != "stderr" {
		t.Fatalf("line 1 %+v", l1)
	}
	// The server's decoder reads the batch back, the invalid byte aside.
	var req LogAppendRequest
	if err := DecodeLogAppend(body, &req); err != nil {
		t.Fatal(err)
	}
	got, err := req.Batch()
	if err != nil {
		t.Fatal(err)
	}
	want := b
	want.Lines = slices.Clone(b.Lines)
	want.Lines[1].Text = "bad \uFFFD utf8"
	if req.RunID != "run1" || !reflect.DeepEqual(got, want) {
		t.Fatalf("the server read back %+v, want %+v", got, want)
	}
}

func TestAppendLogAppendTexts(t *testing.T) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	for _, s := range []string{"", "plain text of some length here", all.String(), "ab\"cdefgh\\ijklmn\x1fopq", "é€😀 mixed \x80 bad", strings.Repeat("x", 17) + "\n" + strings.Repeat("y", 9)} {
		body := AppendLogAppend(nil, "r", runlogs.Batch{Source: "s", Lines: []runlogs.Line{{Stream: runlogs.Stdout, Text: s}}})
		var out struct {
			Lines []struct {
				Text string `json:"text"`
			} `json:"lines"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		// encoding/json's reading of its own encoding: each invalid byte
		// becomes U+FFFD.
		raw, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(raw, &want)
		if out.Lines[0].Text != want {
			t.Fatalf("round trip of %q gave %q", s, out.Lines[0].Text)
		}
	}
}
