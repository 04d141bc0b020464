//go:build !linux || !cgo

// Package nvml is the NVML source of GPU samples. This build has no NVML
// support (it needs Linux and cgo): Open always fails, and the agent falls
// back to nvidia-smi.
package nvml

import (
	"errors"

	"github.com/sextant/sextant/internal/gpu"
)

// Open fails: this build has no NVML support.
func Open() (gpu.Source, error) {
	return nil, errors.New("nvml: not supported by this build (it needs Linux and cgo)")
}
