package gpu_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its tests: what a
// test starts in the background must end when the test closes it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
