package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"

	"github.com/sextant/sextant/internal/gpu"
	"github.com/sextant/sextant/internal/wire"
)

// Node health (docs/gpu.md, "Node health"): every node's health summary
// with the flag rule's verdict, and a node's history of GPU faults across
// runs.
//
// Access: as the GPU pane's routes, any authenticated caller; the run ids
// of a finding are shown only to callers who may read the run.

const nodesPath = "/api/2.0/sextant/nodes"

func (s *Server) registerNodeRoutes() {
	if s.gpu == nil {
		return
	}
	s.handle("GET", nodesPath, Authenticated, s.listNodes)
	s.handle("GET", nodesPath+"/health", Authenticated, s.nodeHealth)
}

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	nodes, err := s.gpu.NodesHealth(r.Context())
	if err != nil {
		return err
	}
	out := wire.NodesResponse{Nodes: make([]wire.NodeHealth, 0, len(nodes)), Rule: s.gpu.FlagRule().String()}
	for _, n := range nodes {
		nj := wire.NodeHealth{Node: n.Node, GPUs: make([]wire.NodeGPU, 0, len(n.GPUs)), LastSeenMs: n.LastSeenMs, LastFaultMs: n.LastFaultMs,
			Counts24h: countsJSON(n.Counts24h), Counts7d: countsJSON(n.Counts7d), Flagged: n.Flagged, Reason: n.Reason}
		for _, g := range n.GPUs {
			nj.GPUs = append(nj.GPUs, wire.NodeGPU{Index: g.Index, UUID: g.UUID, Model: g.Model})
		}
		out.Nodes = append(out.Nodes, nj)
	}
	return writeJSON(w, out)
}

func countsJSON(c gpu.HealthCounts) wire.NodeHealthCounts {
	return wire.NodeHealthCounts{Xid: c.Xid, ECC: c.ECC, Throttle: c.Throttle, Lost: c.Lost}
}

func (s *Server) nodeHealth(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "node", "max_results", "page_token", "from_ms")
	if err != nil {
		return err
	}
	hq := gpu.HealthQuery{Node: q.str("node")}
	if hq.Node == "" {
		return invalid("Missing value for required parameter 'node'")
	}
	if n, set, err := q.int("max_results"); err != nil {
		return err
	} else if set {
		if n < 1 || n > gpu.MaxHealthPage {
			return invalid("max_results must be between 1 and %d, got %d", gpu.MaxHealthPage, n)
		}
		hq.Limit = int(n)
	}
	if hq.FromMs, _, err = q.int("from_ms"); err != nil {
		return err
	}
	if tok := q.str("page_token"); tok != "" {
		if hq.BeforeMs, hq.BeforeKey, err = decodeNodePageToken(tok); err != nil {
			return err
		}
	}
	limit := hq.Limit
	if limit == 0 {
		limit = 100
	}
	hq.Limit = limit
	recs, err := s.gpu.NodeHealthHistory(r.Context(), hq)
	if err != nil {
		return err
	}
	out := wire.NodeHealthResponse{Node: hq.Node, Events: make([]wire.NodeHealthEvent, 0, len(recs))}
	var ids []*string
	for _, rec := range recs {
		ev := wire.NodeHealthEvent{TimeMs: rec.TimeMs, EndMs: rec.EndMs, Open: rec.Open, Kind: rec.Kind, GPU: rec.GPUIndex, UUID: rec.GPUUUID,
			Model: rec.GPUModel, Xid: rec.Xid, XidMeaning: gpu.XidMeaning(rec.Xid), Message: rec.Message, RunIDs: append([]string{}, rec.RunIDs...)}
		out.Events = append(out.Events, ev)
	}
	for i := range out.Events {
		for j := range out.Events[i].RunIDs {
			ids = append(ids, &out.Events[i].RunIDs[j])
		}
	}
	s.readableRuns(r, ids)
	for i := range out.Events {
		out.Events[i].RunIDs = deleteEmpty(out.Events[i].RunIDs)
	}
	if len(recs) == limit {
		last := recs[len(recs)-1]
		out.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(last.TimeMs, 10) + " " + last.Key))
	}
	return writeJSON(w, out)
}

func deleteEmpty(ids []string) []string {
	out := ids[:0]
	for _, id := range ids {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

func decodeNodePageToken(tok string) (int64, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil {
		ms, key, ok := strings.Cut(string(raw), " ")
		if n, perr := strconv.ParseInt(ms, 10, 64); ok && perr == nil && n > 0 && key != "" {
			return n, key, nil
		}
	}
	return 0, "", invalid("invalid page_token: pass the next_page_token of the previous page")
}
