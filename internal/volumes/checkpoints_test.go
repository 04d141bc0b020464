package volumes

import (
	"os"
	"regexp"
	"testing"
	"time"
)

// TestWriterLockNameMatchesPython keeps the lock name Go reads the same as
// the one python/sextant's VolumeWriter writes.
func TestWriterLockNameMatchesPython(t *testing.T) {
	src, err := os.ReadFile("../../python/sextant/checkpoint.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^WRITER_LOCK = "([^"]+)"$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("python/sextant/checkpoint.py defines no WRITER_LOCK")
	}
	if string(m[1]) != WriterLockName {
		t.Fatalf("the Python writer's lock is %q, Go reads %q", m[1], WriterLockName)
	}
}

func TestDescribeCheckpoint(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	lease := func(string) time.Duration { return DefaultWriterLease }
	dir := "/Volumes/c/s/v/run/step-200"
	f := func(name string, size int64, ago time.Duration) CheckpointFile {
		return CheckpointFile{Path: dir + "/" + name, Name: name, Size: size, ModTime: at(ago)}
	}
	t.Run("Complete", func(t *testing.T) {
		ck, ok := DescribeCheckpoint(dir, []CheckpointFile{f("__0_0.distcp", 10, time.Hour), f(MetadataName, 1, 50*time.Minute), f("__1_0.distcp", 5, 40*time.Minute)}, now, lease)
		if !ok || !ck.Complete || ck.Status() != "complete" || ck.Size != 16 || ck.Files != 3 || !ck.HasStep || ck.Step != 200 || !ck.ModTime.Equal(at(50*time.Minute)) {
			t.Fatalf("%+v %v", ck, ok)
		}
	})
	t.Run("WritingWhileTheLockIsFresh", func(t *testing.T) {
		ck, ok := DescribeCheckpoint(dir, []CheckpointFile{f(WriterLockName, 1, 10*time.Second)}, now, lease)
		if !ok || ck.Complete || ck.Status() != "writing" {
			t.Fatalf("%+v %v", ck, ok)
		}
		ck, _ = DescribeCheckpoint(dir, []CheckpointFile{f(WriterLockName, 1, 2*time.Minute)}, now, lease)
		if ck.Status() != "incomplete" {
			t.Fatalf("a stale lock: %+v", ck)
		}
	})
	t.Run("NotACheckpoint", func(t *testing.T) {
		if _, ok := DescribeCheckpoint(dir, []CheckpointFile{f("notes.txt", 1, 0)}, now, lease); ok {
			t.Fatal("a directory of notes is a checkpoint")
		}
		// A .metadata below the directory's top does not make it complete.
		sub := CheckpointFile{Path: dir + "/x/" + MetadataName, Name: MetadataName, ModTime: now}
		if ck, _ := DescribeCheckpoint(dir, []CheckpointFile{sub, f("__0_0.distcp", 1, 0)}, now, lease); ck.Complete {
			t.Fatal("a nested .metadata completes the checkpoint")
		}
	})
}

func TestCheckpointsToDelete(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	cks := []Checkpoint{
		{Path: "s-300", Step: 300, HasStep: true, Complete: true, ModTime: now.Add(-3 * time.Hour)},
		{Path: "s-100", Step: 100, HasStep: true, Complete: true, ModTime: now.Add(-time.Minute)},
		{Path: "s-400", Step: 400, HasStep: true, ModTime: now.Add(-2 * time.Hour)},                // abandoned
		{Path: "s-500", Step: 500, HasStep: true, ModTime: now.Add(-time.Minute)},                  // in its grace
		{Path: "s-600", Step: 600, HasStep: true, Writing: true, ModTime: now.Add(-5 * time.Hour)}, // held
		{Path: "s-200", Step: 200, HasStep: true, Complete: true, ModTime: now.Add(-2 * time.Hour)},
	}
	SortCheckpoints(cks)
	for i, want := range []string{"s-100", "s-200", "s-300", "s-400", "s-500", "s-600"} {
		if cks[i].Path != want {
			t.Fatalf("sorted by step: %d is %s, want %s", i, cks[i].Path, want)
		}
	}
	drop := CheckpointsToDelete(cks, now, 2, time.Hour)
	if len(drop) != 2 || drop["s-100"] == "" || drop["s-400"] == "" {
		t.Fatalf("deletes %v, want s-100 (the oldest complete beyond 2) and s-400 (abandoned)", drop)
	}
	// Without a step in every name, time orders them.
	cks[0].HasStep = false
	SortCheckpoints(cks)
	if cks[0].Path != "s-600" {
		t.Fatalf("by time, the oldest is %s", cks[0].Path)
	}
}
