package wire

import (
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/runevents"
)

// The wire shapes of the run-event routes (/api/2.0/sextant/events/...,
// docs/api.md), in one place: the server decodes and encodes them here,
// and internal/client uses the same types (wire holds every shape).

// EventJSON is a run event on the wire. On append, gpu and step default to
// -1 (none), severity to info, a checkpoint's outcome to complete and its
// blocked_ms to unknown; seq is the server's and ignored.
type EventJSON struct {
	Seq        int64             `json:"seq,omitempty"`
	Key        string            `json:"key,omitempty"`
	Kind       string            `json:"kind"`
	Severity   string            `json:"severity,omitempty"`
	TimeMs     int64             `json:"time_ms"`
	EndMs      int64             `json:"end_ms,omitempty"`
	Open       bool              `json:"open,omitempty"`
	Node       string            `json:"node,omitempty"`
	GPU        *int              `json:"gpu,omitempty"`
	Step       *int64            `json:"step,omitempty"`
	Message    string            `json:"message,omitempty"`
	Checkpoint *CheckpointJSON   `json:"checkpoint,omitempty"`
	Attrs      map[string]string `json:"attrs,omitempty"`
}

// CheckpointJSON is a checkpoint event's checkpoint on the wire.
type CheckpointJSON struct {
	Path      string `json:"path"`
	Outcome   string `json:"outcome,omitempty"`
	Error     string `json:"error,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	Files     int    `json:"files,omitempty"`
	Ranks     int    `json:"ranks,omitempty"`
	Mode      string `json:"mode,omitempty"`
	BlockedMs *int64 `json:"blocked_ms,omitempty"`
	Staging   string `json:"staging,omitempty"`
}

// AppendEventsRequest is the body of POST events/append.
type AppendEventsRequest struct {
	RunID  string      `json:"run_id"`
	Events []EventJSON `json:"events"`
}

// AppendEventsResponse answers POST events/append: the seq of each event,
// in order.
type AppendEventsResponse struct {
	Seqs []int64 `json:"seqs"`
}

// ListEventsResponse answers GET events/list. next_seq is the after_seq
// of the next page; absent on the last.
type ListEventsResponse struct {
	Events  []EventJSON `json:"events"`
	NextSeq int64       `json:"next_seq,omitempty"`
}

// EventToJSON returns ev's wire shape.
func EventToJSON(ev *runevents.Event) EventJSON {
	out := EventJSON{
		Seq: ev.Seq, Key: ev.Key, Kind: ev.Kind.String(), TimeMs: ev.TimeMs, EndMs: ev.EndMs,
		Open: ev.Open, Node: ev.Node, Message: ev.Message, Attrs: ev.Attrs,
	}
	if ev.Severity != 0 {
		out.Severity = ev.Severity.String()
	}
	if ev.GPU >= 0 {
		g := ev.GPU
		out.GPU = &g
	}
	if ev.Step >= 0 {
		s := ev.Step
		out.Step = &s
	}
	if c := ev.Checkpoint; c != nil {
		cj := &CheckpointJSON{Path: c.Path, Error: c.Error, Bytes: c.Bytes, Files: c.Files, Ranks: c.Ranks, Mode: c.Mode, Staging: c.Staging}
		if c.Outcome != 0 {
			cj.Outcome = c.Outcome.String()
		}
		if c.BlockedMs >= 0 {
			b := c.BlockedMs
			cj.BlockedMs = &b
		}
		out.Checkpoint = cj
	}
	return out
}

// Domain returns the event e describes; i is its index in the request,
// for error messages.
func (e *EventJSON) Domain(i int) (runevents.Event, error) {
	ev := runevents.Event{Key: e.Key, TimeMs: e.TimeMs, EndMs: e.EndMs, Open: e.Open, Node: e.Node, GPU: -1, Step: -1, Message: e.Message, Attrs: e.Attrs}
	k, ok := runevents.ParseKind(e.Kind)
	if !ok {
		if e.Kind == "" {
			return ev, invalid("Missing value for required parameter 'events[%d].kind'", i)
		}
		return ev, invalid("Invalid value '%s' for parameter 'events[%d].kind': expected one of %s", errs.Truncate(e.Kind, 40), i, kindList())
	}
	ev.Kind = k
	if e.Severity != "" {
		s, ok := runevents.ParseSeverity(e.Severity)
		if !ok {
			return ev, invalid("Invalid value '%s' for parameter 'events[%d].severity': expected info, warning or error", errs.Truncate(e.Severity, 40), i)
		}
		ev.Severity = s
	}
	if e.GPU != nil {
		ev.GPU = *e.GPU
	}
	if e.Step != nil {
		ev.Step = *e.Step
	}
	if c := e.Checkpoint; c != nil {
		cc := &runevents.Checkpoint{Path: c.Path, Error: c.Error, Bytes: c.Bytes, Files: c.Files, Ranks: c.Ranks, Mode: c.Mode, BlockedMs: -1, Staging: c.Staging}
		if c.Outcome != "" {
			o, ok := runevents.ParseOutcome(c.Outcome)
			if !ok {
				return ev, invalid("Invalid value '%s' for parameter 'events[%d].checkpoint.outcome': expected writing, complete, incomplete or failed", errs.Truncate(c.Outcome, 40), i)
			}
			cc.Outcome = o
		}
		if c.BlockedMs != nil {
			cc.BlockedMs = *c.BlockedMs
		}
		ev.Checkpoint = cc
	}
	return ev, nil
}

func kindList() string {
	s := ""
	for i, k := range runevents.Kinds() {
		if i > 0 {
			s += ", "
		}
		s += k.String()
	}
	return s
}

// parseKinds parses kind parameters: names, repeated or comma-separated.
func ParseKinds(vals []string) ([]runevents.Kind, error) {
	var out []runevents.Kind
	for _, v := range vals {
		for _, name := range splitComma(v) {
			k, ok := runevents.ParseKind(name)
			if !ok {
				return nil, invalid("Invalid value '%s' for parameter 'kind': expected one of %s", errs.Truncate(name, 40), kindList())
			}
			out = append(out, k)
		}
	}
	return out, nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
