package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// benchArtifacts uploads and downloads one large artifact through the
// proxy and compares the rates with the raw write speed of the same disk,
// measured in the same run. It also reports the server's peak RSS.
func benchArtifacts(ctx context.Context, c config, bin string) (any, error) {
	dir, err := os.MkdirTemp("", "sextant-bench-artifacts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	size := c.artifactBytes

	s, err := startServer(ctx, bin, filepath.Join(dir, "data"), c.serverArgs...)
	if err != nil {
		return nil, err
	}
	defer s.kill()
	stopRSS := make(chan struct{})
	peak := make(chan int64, 1)
	go func() {
		var p int64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopRSS:
				peak <- max(p, s.procStatus("VmHWM"))
				return
			case <-t.C:
				p = max(p, s.procStatus("VmRSS"))
			}
		}
	}()
	cl := newClient(s.url)
	exp, err := cl.createExperiment(ctx, "/Shared/bench/artifacts")
	if err != nil {
		return nil, err
	}
	run, err := cl.createRun(ctx, exp, "big-artifact", time.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	url := s.url + "/api/2.0/mlflow-artifacts/artifacts/" + exp + "/" + run + "/artifacts/big.bin"
	block := randomBlock(64 << 20)

	// Three rounds of raw write, upload and download, each phase after a
	// sync so that none pays for the write-back of the one before; the
	// ratios are each round's own, then their median (the disk's speed
	// drifts between rounds on a shared machine).
	var raws, ups, downs, upRatios, downRatios []float64
	for range 3 {
		// 1. Raw disk: write size bytes of random data and fsync. This
		// file is then the upload's source.
		src := filepath.Join(dir, "source.bin")
		syscall.Sync()
		t0 := time.Now()
		if err := writeBlocks(src, block, size); err != nil {
			return nil, err
		}
		rawSecs := time.Since(t0).Seconds()
		logf("artifacts: raw disk write %.0f MB/s", mb(size)/rawSecs)
		sum, err := fileSHA256(src)
		if err != nil {
			return nil, err
		}

		// 2. Upload: a streaming PUT, as mlflow.log_artifact sends it.
		syscall.Sync()
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, "PUT", url, f)
		if err != nil {
			f.Close()
			return nil, err
		}
		req.ContentLength = size
		t0 = time.Now()
		resp, err := cl.hc.Do(req)
		f.Close()
		if err != nil {
			return nil, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("upload: %s", resp.Status)
		}
		upSecs := time.Since(t0).Seconds()
		logf("artifacts: upload %.0f MB/s", mb(size)/upSecs)

		// 3. Download to disk, fsynced, as download_artifacts does.
		syscall.Sync()
		dst := filepath.Join(dir, "downloaded.bin")
		t0 = time.Now()
		resp, err = cl.hc.Get(url)
		if err != nil {
			return nil, err
		}
		out, err := os.Create(dst)
		if err != nil {
			resp.Body.Close()
			return nil, err
		}
		// 1 MiB writes, as the mlflow client's chunked download makes
		// (io.Copy's 32 KiB would measure this loop's system calls).
		n, err := io.CopyBuffer(struct{ io.Writer }{out}, resp.Body, make([]byte, 1<<20))
		resp.Body.Close()
		if err == nil {
			err = out.Sync()
		}
		out.Close()
		if err != nil {
			return nil, err
		}
		downSecs := time.Since(t0).Seconds()
		logf("artifacts: download %.0f MB/s", mb(size)/downSecs)
		// Checked after the clock stops, as the source's sum was: hashing
		// runs at about the disk's speed here and would halve the rate.
		got, err := fileSHA256(dst)
		if err != nil {
			return nil, err
		}
		if n != size || got != sum {
			return nil, fmt.Errorf("downloaded %d bytes, checksum mismatch or short", n)
		}
		os.Remove(src)
		os.Remove(dst)
		raws, ups, downs = append(raws, mb(size)/rawSecs), append(ups, mb(size)/upSecs), append(downs, mb(size)/downSecs)
		upRatios, downRatios = append(upRatios, rawSecs/upSecs), append(downRatios, rawSecs/downSecs)
	}
	close(stopRSS)
	rss := <-peak
	return map[string]any{
		"bytes":                     size,
		"rounds":                    len(raws),
		"raw_disk_write_mb_per_s":   raws,
		"upload_mb_per_s":           ups,
		"download_mb_per_s":         downs,
		"upload_vs_raw_disk":        median(upRatios),
		"download_vs_raw_disk":      median(downRatios),
		"server_peak_rss_mb":        float64(rss) / (1 << 20),
		"checksum_verified":         true,
		"target_vs_raw_disk":        0.7,
		"target_server_peak_rss_mb": 200,
		"note":                      "upload reads the source from the page cache; download writes and fsyncs a copy; the server writes, fsyncs and renames; ratios are medians of each round's own",
	}, nil
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// randomBlock returns n pseudo-random bytes.
func randomBlock(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			buf[i+j] = byte(v >> (8 * j))
		}
	}
	return buf
}

// writeBlocks writes n bytes to path from block, stamping each repetition
// with its index so that no two blocks are equal, and fsyncs: the disk's
// raw write speed, with nothing else in the way.
func writeBlocks(path string, block []byte, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for i, written := 0, int64(0); written < n; i++ {
		block[0], block[1], block[2], block[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		chunk := block[:min(int64(len(block)), n-written)]
		if _, err := f.Write(chunk); err != nil {
			return err
		}
		written += int64(len(chunk))
	}
	return f.Sync()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
