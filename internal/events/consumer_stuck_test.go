package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"voucherd/internal/events"
	"voucherd/internal/voucher"
)

// stuckApplier fails every event of one voucher (a transient error, as a
// reload that cannot finish would) and applies the others.
type stuckApplier struct {
	applier
	stuck string
	mu2   sync.Mutex
	tries int
}

// attempts is how many times the stuck event was tried so far.
func (a *stuckApplier) attempts() int {
	a.mu2.Lock()
	defer a.mu2.Unlock()
	return a.tries
}

func (a *stuckApplier) ApplyEvent(ctx context.Context, ev voucher.Event) error {
	if ev.Code == a.stuck {
		a.mu2.Lock()
		a.tries++
		a.mu2.Unlock()
		return errors.New("gate reload not possible yet")
	}
	return a.applier.ApplyEvent(ctx, ev)
}

// One voucher's event that cannot be applied holds up only its own
// partition: the other vouchers' events are applied and committed.
func TestConsumer_AStuckEventHoldsUpOnlyItsOwnPartition(t *testing.T) {
	t.Parallel()
	cfg := cluster(t)
	p := producer(t, cfg)
	a := &stuckApplier{stuck: "STUCK"}
	// Every event is on the broker before the consumer's first poll, as
	// the warm-up's markers and a request's event were in the CI run.
	publish(t, p, event(voucher.EventConfirmed, "o-stuck", "STUCK"))
	for i := range 15 {
		publish(t, p, event(voucher.EventConfirmed, fmt.Sprintf("o-%d", i), fmt.Sprintf("OTHER%d", i)))
	}
	c, err := events.StartConsumer(context.Background(), cfg, a, p.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	adm := kadm.NewClient(p.Client())
	ctx := context.Background()
	var why string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ends, err := adm.ListEndOffsets(ctx, events.DefaultTopic)
		if err != nil {
			t.Fatal(err)
		}
		committed, err := adm.FetchOffsetsForTopics(ctx, events.DefaultGroup, events.DefaultTopic)
		if err != nil {
			why = err.Error() // no commit yet: the group does not exist
			continue
		}
		behind := 0
		why = ""
		ends.Each(func(e kadm.ListedOffset) {
			c, _ := committed.Lookup(e.Topic, e.Partition)
			at := max(c.At, 0)
			why += fmt.Sprintf(" p%d:%d/%d", e.Partition, at, e.Offset)
			if e.Offset > at {
				behind++
			}
		})
		applied, _ := a.snapshot()
		if behind == 1 && len(applied) >= 10 {
			if len(applied) != 11 {
				t.Errorf("applied %d, want the 11 not behind STUCK in its partition", len(applied))
			}
			t.Logf("the other vouchers applied and committed; only the stuck partition is behind:%s (%d applied, %d tries)", why, len(applied), a.attempts())
			return
		}
		why = fmt.Sprintf("applied %d of 15, %d partition(s) behind:%s", len(applied), behind, why)
	}
	t.Fatalf("a stuck event of STUCK held up the other vouchers' partitions: %s (%d tries of the stuck event)", why, a.attempts())
}
