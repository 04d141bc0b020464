package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sextant/sextant/internal/sqlstore"
)

func TestSharedSecretAndLeases(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			s := b.open(t, sqlstore.Options{Synchronous: "NORMAL"})
			a, err := s.SharedSecret(ctx)
			if err != nil || len(a) != 64 {
				t.Fatalf("secret %q, %v", a, err)
			}
			again, err := s.SharedSecret(ctx)
			if err != nil || string(again) != string(a) {
				t.Fatalf("second call gave another secret: %q, %v", again, err)
			}

			got, err := s.AcquireLease(ctx, "retention", "replica-a", time.Minute)
			if err != nil || !got {
				t.Fatalf("first acquire: %v %v", got, err)
			}
			if got, err := s.AcquireLease(ctx, "retention", "replica-b", time.Minute); err != nil || got {
				t.Fatalf("b took a's live lease: %v %v", got, err)
			}
			if got, err := s.AcquireLease(ctx, "retention", "replica-a", time.Minute); err != nil || !got {
				t.Fatalf("a could not renew: %v %v", got, err)
			}
			if got, err := s.AcquireLease(ctx, "gc", "replica-b", time.Minute); err != nil || !got {
				t.Fatalf("another job's lease: %v %v", got, err)
			}
			// An expired lease goes to whoever asks.
			if got, err := s.AcquireLease(ctx, "short", "replica-a", time.Millisecond); err != nil || !got {
				t.Fatalf("short lease: %v %v", got, err)
			}
			time.Sleep(5 * time.Millisecond)
			if got, err := s.AcquireLease(ctx, "short", "replica-b", time.Minute); err != nil || !got {
				t.Fatalf("b could not take an expired lease: %v %v", got, err)
			}
		})
	}
}
