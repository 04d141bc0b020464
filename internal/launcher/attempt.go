package launcher

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/runevents"
	"github.com/sextant/sextant/internal/tracking"
)

// attempt records this execution of the job on the run, as an attempt
// event (runevents.KindAttempt): open from the job's start, updated when
// the sampler sees more GPUs, closed with the status when the job ends.
// The server computes the run's GPU-hours from these (docs/gpu.md).
type attempt struct {
	l  *launcher
	mu sync.Mutex
	ev runevents.Event
}

// startAttempt records the attempt's start, or returns nil when the run's
// events are out of reach or another launcher of the node records it (one
// launcher per rank: local rank 0 does, as it samples the node).
func (l *launcher) startAttempt(ctx context.Context, startMs int64) *attempt {
	o := &l.opts
	if o.Events == nil || o.Job.LocalRank > 0 {
		return nil
	}
	node := hostname()
	a := &attempt{l: l, ev: runevents.Event{
		Key:  "attempt:" + strconv.Itoa(max(o.Job.NodeRank, 0)) + ":" + strconv.FormatInt(startMs, 10),
		Kind: runevents.KindAttempt, TimeMs: startMs, Open: true, Node: node, GPU: -1, Step: -1,
		Message: "job running",
		Attrs:   map[string]string{gpuhours.AttrGPUs: "0"},
	}}
	a.append(ctx)
	return a
}

// gpus records that the sampler has seen n distinct GPUs of the job on
// node so far. It is called from the sampler's goroutine, never after the
// sampler has stopped.
func (a *attempt) gpus(node string, n int, model string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if strconv.Itoa(n) == a.ev.Attrs[gpuhours.AttrGPUs] {
		return
	}
	if node != "" {
		a.ev.Node = node
	}
	a.ev.Attrs[gpuhours.AttrGPUs] = strconv.Itoa(n)
	a.ev.Attrs[gpuhours.AttrModel] = model
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.append(ctx)
}

// end records the attempt's end.
func (a *attempt) end(ctx context.Context, endMs int64, st tracking.RunStatus, code int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ev.Open, a.ev.EndMs = false, max(endMs, a.ev.TimeMs)
	a.ev.Attrs[gpuhours.AttrStatus] = st.String()
	a.ev.Message = fmt.Sprintf("job ended: %s (exit code %d)", st, code)
	a.append(ctx)
}

func (a *attempt) append(ctx context.Context) {
	ev := a.ev
	ev.Attrs = make(map[string]string, len(a.ev.Attrs))
	for k, v := range a.ev.Attrs {
		ev.Attrs[k] = v
	}
	if _, err := a.l.opts.Events.AppendEvents(ctx, a.l.run.Info.RunID, []runevents.Event{ev}); err != nil {
		a.l.say("could not record this attempt on the run (its GPU-hours will miss it): %v", err)
	}
}
