package workspace

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sextant/sextant/internal/errs"
)

// Node tokens: the identity a GPU node reports its samples with.
//
// An administrator creates a token scoped to named nodes (sextant tokens
// create --nodes gpu-01,gpu-02 NAME) and gives it to the agents of those
// nodes. It may post the samples of its nodes and nothing else: no other
// route, no run, no administrator's power of whoever created it. Once a
// live node token names a node, the node's samples (what the GPU pane
// shows for it, processes included) come only from such a token; a user's
// samples for it still become their run's system metrics (sextant run
// samples the job's GPUs for its run) but are not the node's. See
// AuthorizeNodeReport and docs/gpu.md.

// MaxTokenNodes caps the nodes one node token names.
const MaxTokenNodes = 1000

// NodeReport says what becomes of a batch of GPU samples a subject may
// post.
type NodeReport int

// The outcomes of AuthorizeNodeReport.
const (
	// ReportAsNode stores the samples as the node's (and, with a run,
	// logs them to the run too).
	ReportAsNode NodeReport = iota + 1
	// ReportRunOnly logs the samples to their run (system metrics, GPU
	// health events) without storing them as the node's: a node token
	// reports for the node.
	ReportRunOnly
)

// CheckScope refuses a request made with a node token unless it reports
// GPU samples (reportsGPU): a node token does nothing else.
func CheckScope(sub *Subject, reportsGPU bool) error {
	if sub == nil || sub.Nodes == nil || reportsGPU {
		return nil
	}
	return errs.Errorf(errs.PermissionDenied, "this is a node token: it only posts the GPU samples of %s; use a user's credentials for anything else", nodeList(sub.Nodes))
}

func nodeList(nodes []string) string {
	if len(nodes) > 5 {
		return "nodes " + strings.Join(nodes[:5], ", ") + " and " + strconv.Itoa(len(nodes)-5) + " more"
	}
	if len(nodes) == 1 {
		return "node " + nodes[0]
	}
	return "nodes " + strings.Join(nodes, ", ")
}

// scoped returns the subject of a request made with t: sub itself for a
// user's token, a node token's subject (Nodes set, sub unchanged: it is
// cached and shared) otherwise.
func scoped(sub *Subject, t *Token) *Subject {
	if len(t.Nodes) == 0 {
		return sub
	}
	return &Subject{User: sub.User, Groups: sub.Groups, Nodes: t.Nodes}
}

// ParseNodes splits a comma-separated list of node names, as the
// --nodes flag and the API's nodes field take them, and checks each.
func ParseNodes(list []string) ([]string, error) {
	var out []string
	for _, item := range list {
		for n := range strings.SplitSeq(item, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			if len(n) > 255 || !utf8.ValidString(n) || strings.IndexFunc(n, unicode.IsControl) >= 0 {
				return nil, errs.Errorf(errs.Invalid, "invalid node name %q: 1 to 255 bytes of UTF-8 without control characters", errs.Truncate(n, 80))
			}
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	if len(out) > MaxTokenNodes {
		return nil, errs.Errorf(errs.Invalid, "a node token names at most %d nodes, got %d", MaxTokenNodes, len(out))
	}
	return out, nil
}

// CreateNodeToken creates a node token (administrators only) for the
// nodes named, and returns its secret, shown only this once. ttl 0 means
// no expiry. The token belongs to the administrator who creates it: it
// stops working when their account is disabled or it is revoked.
func (s *Service) CreateNodeToken(ctx context.Context, sub *Subject, name string, ttl time.Duration, nodes []string) (string, *Token, error) {
	if err := s.Authorize(ctx, sub, OpCreateNodeToken, Resource{}); err != nil {
		return "", nil, err
	}
	nodes, err := ParseNodes(nodes)
	if err != nil {
		return "", nil, err
	}
	if len(nodes) == 0 {
		return "", nil, errs.E(errs.Invalid, "a node token names at least one node")
	}
	if name == "" || utf8.RuneCountInString(name) > 100 {
		return "", nil, errs.E(errs.Invalid, "a token needs a name of 1 to 100 characters")
	}
	if ttl < 0 {
		return "", nil, errs.E(errs.Invalid, "a token's lifetime must not be negative")
	}
	secret := TokenPrefix + randomHex(32)
	h := hashSecret(secret)
	t := &Token{UserID: sub.User.ID, Name: name, CreatedMs: s.nowMs(), Nodes: nodes}
	if ttl > 0 {
		t.ExpiresMs = s.now().Add(ttl).UnixMilli()
	}
	if err := s.store.CreateToken(ctx, t, h[:]); err != nil {
		return "", nil, err
	}
	s.claims.forget()
	s.audit(ctx, sub, "token.create", sub.User.Email, "node token "+strconv.FormatInt(t.ID, 10)+" "+name+" for "+nodeList(nodes))
	return secret, t, nil
}

// AuthorizeNodeReport decides whether the subject may post GPU samples
// for node (withRun: the batch names a run, whose CAN_EDIT the caller
// checks too), and what becomes of them:
//
//   - a node token: only for its nodes, and never for a run;
//   - an administrator (single-user mode's local one included): as the
//     node's;
//   - any other user: only with a run (sextant run samples the job's GPUs
//     for its run), as the node's unless a live node token names the
//     node, and then only as the run's (ReportRunOnly). Node-wide samples
//     need a node token.
func (s *Service) AuthorizeNodeReport(ctx context.Context, sub *Subject, node string, withRun bool) (NodeReport, error) {
	if sub != nil && sub.Nodes != nil {
		switch {
		case withRun:
			return 0, errs.Errorf(errs.PermissionDenied, "a node token reports its nodes' samples, not a run's: a run's samples come from sextant run with the user's credentials")
		case !slices.Contains(sub.Nodes, node):
			return 0, errs.Errorf(errs.PermissionDenied, "this node token reports for %s, not node %q: use the node token of %q (an administrator creates one: sextant tokens create --nodes %s NAME)", nodeList(sub.Nodes), errs.Truncate(node, 80), errs.Truncate(node, 80), errs.Truncate(node, 80))
		}
		return ReportAsNode, nil
	}
	if sub.IsActiveAdmin() {
		return ReportAsNode, nil
	}
	if !withRun {
		return 0, errs.Errorf(errs.PermissionDenied, "samples for node %q must come from a node token: an administrator creates one with sextant tokens create --nodes %s NAME, for the node's agent (docs/gpu.md); a user's samples must name a run they can edit, as sextant run's do", errs.Truncate(node, 80), errs.Truncate(node, 80))
	}
	claimed, err := s.nodeClaimed(ctx, node)
	if err != nil {
		return 0, err
	}
	if claimed {
		return ReportRunOnly, nil
	}
	return ReportAsNode, nil
}

// nodeClaims caches the nodes that live node tokens name, for CacheTTL
// (a token created or revoked on this replica takes effect at once).
type nodeClaims struct {
	mu    sync.Mutex
	nodes map[string]bool
	until time.Time
}

func (c *nodeClaims) forget() {
	c.mu.Lock()
	c.until = time.Time{}
	c.mu.Unlock()
}

func (s *Service) nodeClaimed(ctx context.Context, node string) (bool, error) {
	now := s.now()
	c := &s.claims
	c.mu.Lock()
	if now.Before(c.until) {
		ok := c.nodes[node]
		c.mu.Unlock()
		return ok, nil
	}
	c.mu.Unlock()
	nodes, err := s.store.NodeTokenNodes(ctx, now.UnixMilli())
	if err != nil {
		return false, err
	}
	m := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		m[n] = true
	}
	c.mu.Lock()
	c.nodes, c.until = m, now.Add(s.opts.CacheTTL)
	c.mu.Unlock()
	return m[node], nil
}
