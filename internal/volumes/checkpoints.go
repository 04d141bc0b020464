package volumes

import (
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// What a directory of PyTorch Distributed Checkpoints in a volume holds,
// and which of them a clean-up may delete: `sextant ckpt ls` and `gc`
// read a listing through the client and decide here.

// WriterLockName is the file python/sextant's VolumeWriter (WRITER_LOCK)
// keeps in a checkpoint directory while it saves, refreshed within its
// lease; TestWriterLockNameMatchesPython keeps the two the same.
const WriterLockName = ".sextant-writer"

// DefaultWriterLease is how long a writer lock stays fresh without a
// refresh when it does not say (VolumeWriter's default lease_seconds).
const DefaultWriterLease = 60 * time.Second

// CheckpointFile is a file under a checkpoint directory, as a listing of
// the directory and its subdirectories gives it.
type CheckpointFile struct {
	// Path is the file's full /Volumes path; Name its last element.
	Path, Name string
	Size       int64
	ModTime    time.Time
}

// Checkpoint is the state of one checkpoint directory.
type Checkpoint struct {
	// Path is the directory's /Volumes path; Name its last element.
	Path, Name string
	// Complete is true once the directory's MetadataName landed.
	Complete bool
	// Writing is true while a writer's lock in it is fresh.
	Writing bool
	// Size and Files add up every file under the directory.
	Size  int64
	Files int
	// ModTime is when MetadataName landed for a complete checkpoint, else
	// the newest file's time.
	ModTime time.Time
	// Step is the number the directory's name ends with (step-1000), if
	// HasStep.
	Step    int64
	HasStep bool
}

// Status names the checkpoint's state: complete, writing or incomplete.
func (c Checkpoint) Status() string {
	switch {
	case c.Complete:
		return "complete"
	case c.Writing:
		return "writing"
	}
	return "incomplete"
}

var trailingNumber = regexp.MustCompile(`(\d+)$`)

// DescribeCheckpoint describes the directory dir from its files; ok is
// false when it holds no checkpoint (no MetadataName, no .distcp shard and
// no writer's lock). lease returns the lease a writer lock declares, read
// only when the directory has one.
func DescribeCheckpoint(dir string, files []CheckpointFile, now time.Time, lease func(lockPath string) time.Duration) (ck Checkpoint, ok bool) {
	ck = Checkpoint{Path: dir, Name: path.Base(dir)}
	if m := trailingNumber.FindString(ck.Name); m != "" {
		ck.Step, _ = strconv.ParseInt(m, 10, 64)
		ck.HasStep = true
	}
	shards, lock := false, false
	var newest, meta time.Time
	for _, f := range files {
		ck.Size += f.Size
		ck.Files++
		if f.ModTime.After(newest) {
			newest = f.ModTime
		}
		top := path.Dir(f.Path) == dir
		switch {
		case top && f.Name == MetadataName:
			ck.Complete, meta = true, f.ModTime
		case top && f.Name == WriterLockName:
			lock = true
			ck.Writing = now.Sub(f.ModTime) < lease(f.Path)
		case strings.HasSuffix(f.Name, ".distcp"):
			shards = true
		}
	}
	ck.ModTime = newest
	if ck.Complete {
		ck.ModTime = meta
	}
	// A directory with shards, or with a writer's lock (whose save may have
	// died before any shard landed), is a checkpoint, if an incomplete one.
	return ck, ck.Complete || shards || lock
}

// IsCheckpointFile reports whether a file of that name makes its
// directory a checkpoint by itself (the metadata or a shard).
func IsCheckpointFile(name string) bool {
	return name == MetadataName || strings.HasSuffix(name, ".distcp")
}

// SortCheckpoints orders checkpoints oldest first: by step when every one
// has a step in its name, else by time.
func SortCheckpoints(cks []Checkpoint) {
	byStep := len(cks) > 0
	for _, ck := range cks {
		byStep = byStep && ck.HasStep
	}
	sort.SliceStable(cks, func(i, j int) bool {
		if byStep && cks[i].Step != cks[j].Step {
			return cks[i].Step < cks[j].Step
		}
		return cks[i].ModTime.Before(cks[j].ModTime)
	})
}

// CheckpointsToDelete says which of cks (sorted by SortCheckpoints) a
// clean-up deletes, and why: complete ones older than the newest keep,
// and incomplete ones no writer holds that nobody touched for grace. The
// map is keyed by path.
func CheckpointsToDelete(cks []Checkpoint, now time.Time, keep int, grace time.Duration) map[string]string {
	var complete []Checkpoint
	for _, ck := range cks {
		if ck.Complete {
			complete = append(complete, ck)
		}
	}
	drop := map[string]string{}
	for i, ck := range complete {
		if i < len(complete)-keep {
			drop[ck.Path] = "complete, older than the newest " + strconv.Itoa(keep)
		}
	}
	for _, ck := range cks {
		// The server's clock has whole seconds: a file written this second
		// may look a little younger than zero.
		if age := max(now.Sub(ck.ModTime), 0); !ck.Complete && !ck.Writing && age >= grace {
			drop[ck.Path] = "incomplete, untouched for " + age.Round(time.Second).String()
		}
	}
	return drop
}
