package launcher

import "context"

// Sampler samples the hardware a job runs on (its GPUs) for the job's run
// while the job runs. The launcher calls Start once the job's process has
// started and the returned stop once it has exited, before it records the
// run's final status. Start must return promptly and sample in the
// background; stop must return within its context's deadline. A Sampler
// that fails is reported and otherwise ignored: sampling never stops a job.
type Sampler interface {
	Start(ctx context.Context, job SampledJob) (stop func(ctx context.Context) error, err error)
}

// SampledJob is what a Sampler needs to know about the job.
type SampledJob struct {
	RunID        string
	ExperimentID string
	// NodeRank and LocalRank are the launcher's (LocalRank -1 when it
	// captures all the ranks of its node).
	NodeRank  int
	LocalRank int
	// PID is the job's process id; its process group has the same id.
	PID int
	// VisibleDevices is the job's CUDA_VISIBLE_DEVICES ("" means all).
	VisibleDevices string
	// OnGPUs, when set, is called from the sampler's goroutine each time
	// the number of distinct GPUs sampled for the job grows, with the
	// node's name, that number and the GPUs' product name; never after
	// stop has returned.
	OnGPUs func(node string, gpus int, model string)
}

// NopSampler samples nothing.
type NopSampler struct{}

// Start implements Sampler.
func (NopSampler) Start(context.Context, SampledJob) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}
