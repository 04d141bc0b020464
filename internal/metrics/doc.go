// Package metrics is the storage-agnostic engine for metric time series:
// the Point type and its total order, merging and de-duplication, a compact
// chunk encoding, chunk summaries, and the step sampling and min/max
// downsampling behind MLflow's get-history-bulk-interval.
//
// A metric series is a list of points sorted by Compare: by step, then by
// timestamp, then by value. MLflow lets a client log the same step many
// times, so a series may hold several points per step; only exact duplicates
// (Equal) are dropped when series are merged.
//
// Points are stored in chunks. AppendChunk encodes a sorted slice of points
// Gorilla-style (delta-of-delta steps and timestamps, XOR-compressed values)
// into about 0.4 to 8 bytes per point, depending on how much the values
// vary, and DecodeChunk turns a chunk back into points. The byte layout is
// described in docs/format/chunk.md. DecodeChunk is safe on hostile input:
// it returns an error wrapping ErrCorruptChunk, never panics, and never
// allocates more points than the chunk's length in bits.
//
// The package does no I/O and keeps no state; every function is safe for
// concurrent use on distinct arguments. Functions named Append* or taking a
// dst argument append to the caller's slice and return it, so callers can
// reuse buffers across calls.
package metrics
