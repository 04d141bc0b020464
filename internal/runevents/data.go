package runevents

import (
	"encoding/json"
	"fmt"

	"github.com/sextant/sextant/internal/errs"
)

// An event's kind-specific part (its checkpoint and attributes) is stored
// as one JSON object beside the common columns:
//
//	{"checkpoint": {"path": "/Volumes/...", "outcome": 2, "error": "...", "bytes": 123,
//	                "files": 4, "ranks": 2, "mode": "process", "blocked_ms": 812, "staging": "shared"},
//	 "attrs": {"xid": "79"}}
//
// Both members are left out when empty (an event without either stores
// "{}"). outcome is Outcome's persisted number. Readers ignore members
// they do not know, so later versions may add some.

type dataJSON struct {
	Checkpoint *checkpointJSON   `json:"checkpoint,omitempty"`
	Attrs      map[string]string `json:"attrs,omitempty"`
}

type checkpointJSON struct {
	Path      string `json:"path"`
	Outcome   uint8  `json:"outcome"`
	Error     string `json:"error,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	Files     int    `json:"files,omitempty"`
	Ranks     int    `json:"ranks,omitempty"`
	Mode      string `json:"mode,omitempty"`
	BlockedMs *int64 `json:"blocked_ms,omitempty"`
	Staging   string `json:"staging,omitempty"`
}

// EncodeData returns the stored form of ev's checkpoint and attributes.
func EncodeData(ev *Event) []byte {
	var d dataJSON
	if c := ev.Checkpoint; c != nil {
		cj := &checkpointJSON{Path: c.Path, Outcome: uint8(c.Outcome), Error: c.Error, Bytes: c.Bytes, Files: c.Files, Ranks: c.Ranks, Mode: c.Mode, Staging: c.Staging}
		if c.BlockedMs >= 0 {
			b := c.BlockedMs
			cj.BlockedMs = &b
		}
		d.Checkpoint = cj
	}
	if len(ev.Attrs) > 0 {
		d.Attrs = ev.Attrs
	}
	b, err := json.Marshal(d)
	if err != nil { // strings and numbers only: cannot fail
		panic(fmt.Sprintf("runevents: encode data: %v", err))
	}
	return b
}

// DecodeData sets ev's checkpoint and attributes from their stored form.
func DecodeData(data []byte, ev *Event) error {
	ev.Checkpoint, ev.Attrs = nil, nil
	if len(data) == 0 {
		return nil
	}
	var d dataJSON
	if err := json.Unmarshal(data, &d); err != nil {
		return errs.Wrap(errs.Internal, err, "decode a stored event")
	}
	if c := d.Checkpoint; c != nil {
		ev.Checkpoint = &Checkpoint{Path: c.Path, Outcome: Outcome(c.Outcome), Error: c.Error, Bytes: c.Bytes, Files: c.Files, Ranks: c.Ranks, Mode: c.Mode, BlockedMs: -1, Staging: c.Staging}
		if c.BlockedMs != nil {
			ev.Checkpoint.BlockedMs = *c.BlockedMs
		}
	}
	ev.Attrs = d.Attrs
	return nil
}
