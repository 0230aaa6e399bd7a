package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Offsets reads the topic's end offsets and the group's committed offsets:
// Settle waits on them and the lag gauge shows them.
type Offsets struct {
	adm   *kadm.Client
	topic string
	group string
	obs   Observer
}

// NewOffsets uses cl (any client of the cluster) for admin requests.
func NewOffsets(cfg Config, cl *kgo.Client) *Offsets {
	cfg = cfg.withDefaults()
	return &Offsets{adm: kadm.NewClient(cl), topic: cfg.Topic, group: cfg.Group, obs: cfg.Observer}
}

// Settle waits until the group has committed every event written before the
// call (its committed offsets reach the end offsets taken now), or ctx ends.
// It implements voucher.PendingWrites: reconciliation and gate rebuilds wait
// on it so events in flight do not look like leaks or get lost.
func (o *Offsets) Settle(ctx context.Context) error {
	ends, err := o.adm.ListEndOffsets(ctx, o.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("events: end offsets: %w", err)
	}
	for {
		lag, err := o.lagTo(ctx, ends)
		if err != nil {
			return err
		}
		if lag == 0 {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("events: %d event(s) still to apply: %w", lag, err)
		}
	}
}

// Lag is how many events the group has yet to commit.
func (o *Offsets) Lag(ctx context.Context) (int64, error) {
	ends, err := o.adm.ListEndOffsets(ctx, o.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("events: end offsets: %w", err)
	}
	return o.lagTo(ctx, ends)
}

func (o *Offsets) lagTo(ctx context.Context, ends kadm.ListedOffsets) (int64, error) {
	committed, err := o.adm.FetchOffsetsForTopics(ctx, o.group, o.topic)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = nil, nil // no member has joined yet: nothing committed
	}
	if err != nil {
		return 0, fmt.Errorf("events: committed offsets of %s: %w", o.group, err)
	}
	var lag int64
	ends.Each(func(end kadm.ListedOffset) {
		at := int64(0)
		if c, ok := committed.Lookup(end.Topic, end.Partition); ok && c.At > 0 {
			at = c.At
		}
		if end.Offset > at {
			lag += end.Offset - at
		}
	})
	return lag, nil
}

// WatchLag sets the lag gauge every interval until ctx ends. It reads the
// broker, not the consumer, so a stuck or dead consumer shows as lag.
func (o *Offsets) WatchLag(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pass, cancel := context.WithTimeout(ctx, interval)
		lag, err := o.Lag(pass)
		cancel()
		if err == nil {
			o.obs.ConsumerLag(lag)
		} else if ctx.Err() == nil {
			logger.DebugContext(ctx, "consumer lag not read", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
