package webhook_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"voucherd/internal/postgres"
	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
	"voucherd/internal/webhook"
)

// lookingStore is the real store, noting when the worker looked for events.
type lookingStore struct {
	voucher.WebhookDeliveryStore
	mu    sync.Mutex
	looks []time.Time
}

func (s *lookingStore) DispatchWebhookEvents(ctx context.Context, max int) (int, error) {
	s.mu.Lock()
	s.looks = append(s.looks, time.Now())
	s.mu.Unlock()
	return s.WebhookDeliveryStore.DispatchWebhookEvents(ctx, max)
}

// An idle worker waits twice as long after each look that found nothing,
// from Poll up to IdlePoll: every instance runs one, and at a fixed 250 ms
// each idle instance made eight statements a second.
func TestWorker_AnIdleWorkerLooksLessOftenUpToIdlePoll(t *testing.T) {
	store := &lookingStore{WebhookDeliveryStore: postgres.New(testdb.Migrated(t, testenv.DatabaseURL()))}
	w := webhook.NewWorker(webhook.Config{Store: store, Poll: 250 * time.Millisecond, IdlePoll: time.Second})
	w.Start(context.Background())
	defer w.Stop()
	var looks []time.Time
	testenv.Eventually(t, "five looks for events", func() (bool, string) {
		store.mu.Lock()
		defer store.mu.Unlock()
		looks = append(looks[:0], store.looks...)
		return len(looks) >= 5, fmt.Sprint(len(looks))
	})
	// A timer never fires early: each gap is at least its wait (a slow
	// machine only makes it longer).
	for i, want := range []time.Duration{500 * time.Millisecond, time.Second, time.Second} {
		if gap := looks[i+2].Sub(looks[i+1]); gap < want-20*time.Millisecond {
			t.Errorf("gap %d between looks = %s, want at least %s (250 ms doubled after each empty look, up to 1 s)", i+2, gap, want)
		}
	}
}
