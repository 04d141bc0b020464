package blob

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// trashPrefix names what tmp/ holds for removal: deleted blobs and trees.
// Such an entry is garbage whatever its age, so RemoveStale removes it at
// once (it is the leftover of a crash while the reaper was at work).
const trashPrefix = "del-"

// reaper removes trashed files and trees in the background, one at a time.
// Freeing a large file's blocks takes tens of milliseconds on ext4 (27 ms
// for 128 MiB on the development VM), which a DELETE need not wait for:
// the blob is gone once it was renamed into tmp/. Close waits for the
// queue to drain, so nothing is left behind by a clean shutdown.
type reaper struct {
	mu      sync.Mutex
	queue   []string
	running bool
	done    sync.WaitGroup
}

// trash moves name (a file or a tree, relative to the root) into tmp/, so
// that it is gone from its place at once, and queues it for removal.
func (d *Dir) trash(name string) error {
	t := dirTmp + "/" + trashPrefix + randomHex(8)
	if err := d.root.Rename(name, t); err != nil {
		return err
	}
	r := &d.reap
	r.mu.Lock()
	r.queue = append(r.queue, t)
	if !r.running {
		r.running = true
		r.done.Add(1)
		go d.reapLoop()
	}
	r.mu.Unlock()
	return nil
}

func (d *Dir) reapLoop() {
	r := &d.reap
	defer r.done.Done()
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		name := r.queue[0]
		r.queue = r.queue[1:]
		r.mu.Unlock()
		if err := d.root.RemoveAll(name); err != nil {
			d.log.Warn("removing a deleted blob failed; OpenDir retries", "path", filepath.Join(d.path, name), "err", err)
		}
	}
}

// waitReaped returns once everything trashed so far is removed.
func (d *Dir) waitReaped() { d.reap.done.Wait() }

func isTrash(name string) bool { return strings.HasPrefix(name, trashPrefix) }

// startStaleLoop runs RemoveStale every DirOptions.StaleEvery until Close:
// an abandoned multipart upload (its parts count in Usage, and no listing
// shows them) goes within StaleEvery of reaching UploadMaxAge, not at the
// next start.
func (d *Dir) startStaleLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stale.cancel = cancel
	if d.opts.StaleEvery <= 0 {
		return
	}
	d.stale.done.Go(func() {
		t := time.NewTicker(d.opts.StaleEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := d.removeStale(ctx, false); err != nil && ctx.Err() == nil {
				d.log.Warn("removing stale temporary files and uploads failed; retried in "+d.opts.StaleEvery.String(), "err", err)
			}
		}
	})
}

func (d *Dir) stopStaleLoop() {
	if d.stale.cancel != nil {
		d.stale.cancel()
	}
	d.stale.done.Wait()
}
