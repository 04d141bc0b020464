package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sextant/sextant/internal/client"
	"github.com/sextant/sextant/internal/errs"
	"github.com/sextant/sextant/internal/gpuhours"
	"github.com/sextant/sextant/internal/tracking"
	"github.com/sextant/sextant/internal/wire"
)

// gpuHoursColumns are the GPU-HOURS (and COST) columns of `sextant runs
// ls`, shown when a listed run held GPUs (as ALERT shows only when a run
// has one); left out when the server could not say (an older server).
type gpuHoursColumns struct {
	res  *wire.GPUHoursResponse
	runs map[string]wire.GPUHoursRun
}

// runsGPUHours asks the server for the runs' GPU-hours. A failure leaves
// the columns out, with a note on w.
func runsGPUHours(ctx context.Context, cl *client.Client, w io.Writer, runs []*tracking.Run) gpuHoursColumns {
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.Info.RunID
	}
	res, err := cl.GPUHours(ctx, ids)
	if err != nil {
		if errs.CodeOf(err) != errs.NotFound { // an older server has no such route
			fmt.Fprintf(w, "sextant: no GPU-hours: %s\n", errs.MessageOf(err))
		}
		return gpuHoursColumns{}
	}
	c := gpuHoursColumns{res: res, runs: make(map[string]wire.GPUHoursRun, len(res.Runs))}
	held := false
	for _, r := range res.Runs {
		c.runs[r.RunID] = r
		for _, a := range r.Attempts {
			held = held || a.GPUs > 0
		}
	}
	if !held {
		return gpuHoursColumns{}
	}
	return c
}

func (c gpuHoursColumns) head() string {
	switch {
	case c.res == nil:
		return ""
	case c.res.Cost != nil:
		return "\tGPU-HOURS\tCOST"
	}
	return "\tGPU-HOURS"
}

func (c gpuHoursColumns) cells(runID string) string {
	if c.res == nil {
		return ""
	}
	r, ok := c.runs[runID]
	s := "\t-"
	if ok {
		s = "\t" + gpuhours.FormatAmount(r.GPUHours)
	}
	if c.res.Cost != nil {
		if ok && r.Cost != nil {
			s += "\t" + gpuhours.FormatAmount(*r.Cost)
		} else {
			s += "\t-"
		}
	}
	return s
}
