package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/tracking"
)

// goodputMaxRuns is the most listed runs whose goodput `sextant runs ls`
// asks for: the route answers one run at a time, so a longer list leaves
// the GOODPUT column out rather than send hundreds of requests.
const goodputMaxRuns = 50

// goodputParallel is how many goodput requests runs ls has in flight.
const goodputParallel = 8

// goodputColumn is the GOODPUT column of `sextant runs ls`: the goodput
// of each listed run that reported progress (docs/run.md), by run ID. A
// nil column is left out: no listed run reported progress, the list is
// longer than goodputMaxRuns, or the server could not say.
type goodputColumn map[string]float64

// runsGoodput asks the server for the goodput of each run. A failure
// leaves the column out, with a note on w.
func runsGoodput(ctx context.Context, cl *client.Client, w io.Writer, runs []*tracking.Run) goodputColumn {
	if len(runs) > goodputMaxRuns {
		return nil
	}
	type result struct {
		goodput  float64
		progress bool
		err      error
	}
	res := make([]result, len(runs))
	sem := make(chan struct{}, goodputParallel)
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			g, err := cl.Goodput(ctx, r.Info.RunID)
			if err != nil {
				res[i].err = err
				return
			}
			// Every run has a goodput (0 without steps); only one that
			// reported progress has a meaningful one.
			res[i].progress = len(g.Ranks) > 0 && g.Goodput != nil
			if res[i].progress {
				res[i].goodput = *g.Goodput
			}
		}()
	}
	wg.Wait()
	col := goodputColumn{}
	for i, r := range res {
		switch {
		case r.err != nil && errs.CodeOf(r.err) == errs.NotFound:
			// An older server has no such route (or the run was deleted
			// meanwhile): nothing to show for it.
			continue
		case r.err != nil:
			fmt.Fprintf(w, "sextant: no goodput: %s\n", errs.MessageOf(r.err))
			return nil
		case r.progress:
			col[runs[i].Info.RunID] = r.goodput
		}
	}
	if len(col) == 0 {
		return nil
	}
	return col
}

func (c goodputColumn) head() string {
	if c == nil {
		return ""
	}
	return "\tGOODPUT"
}

func (c goodputColumn) cell(runID string) string {
	if c == nil {
		return ""
	}
	g, ok := c[runID]
	if !ok {
		return "\t-"
	}
	return fmt.Sprintf("\t%d%%", int(math.Round(g*100)))
}
