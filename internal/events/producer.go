package events

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"voucherd/internal/voucher"
)

// Producer publishes the gate's decisions: an idempotent producer with
// acks=all, answering only once the broker acknowledged (or surely refused)
// the event. It implements voucher.EventPublisher.
type Producer struct {
	cl    *kgo.Client
	topic string
	obs   Observer
	// sent counts the produce requests that left for a broker (some bytes
	// written). A record whose Publish saw none leave was surely never
	// sent, whatever franz-go says and however late.
	sent *produceWrites
}

// produceWrites is a franz-go hook counting produce requests written.
type produceWrites struct{ n atomic.Int64 }

func (w *produceWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, bytesWritten int, _, _ time.Duration, _ error) {
	// A request that failed half-written may still have reached the
	// broker whole: any byte counts.
	if key == kmsg.Produce.Int16() && bytesWritten > 0 {
		w.n.Add(1)
	}
}

var _ voucher.EventPublisher = (*Producer)(nil)

// NewProducer opens a producer client.
func NewProducer(cfg Config) (*Producer, error) {
	cfg = cfg.withDefaults()
	sent := &produceWrites{}
	cl, err := kgo.NewClient(
		kgo.WithHooks(sent),
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.Topic),
		// Idempotent (franz-go's default with acks=all): a retried batch is
		// written once, and franz-go fails a record only when it is sure the
		// broker did not write it.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(max(cfg.PublishTimeout, time.Second)), // franz-go's minimum
		// A broker that does not answer within these is given up on: the
		// connection is closed and the batch sent again (written once).
		kgo.ProduceRequestTimeout(max(cfg.PublishTimeout, time.Second)),
		kgo.RequestTimeoutOverhead(2*time.Second),
	)
	if err != nil {
		return nil, fmt.Errorf("events: producer: %w", err)
	}
	return &Producer{cl: cl, topic: cfg.Topic, obs: cfg.Observer, sent: sent}, nil
}

// unknownAfter is how long Publish waits, after its context ends, for
// franz-go to fail the record as surely not written; past it the outcome is
// unknown (the record was sent and no answer came). A second, not less: the
// delivery timeout fires with the context's deadline, and on a loaded
// machine its timer runs late; an unknown outcome holds the use until the
// admission's lease runs out.
const unknownAfter = time.Second

// Publish sends one event keyed by its voucher code and waits for the
// broker's acknowledgement, at most until ctx ends. An error wraps
// voucher.ErrPublishUnknown when the event may still be written.
func (p *Producer) Publish(ctx context.Context, ev voucher.Event) error {
	value, err := Encode(ev)
	if err != nil {
		return fmt.Errorf("events: encode %s: %w", ev, err)
	}
	start, sentBefore := time.Now(), p.sent.n.Load()
	done := make(chan error, 1)
	p.cl.Produce(ctx, &kgo.Record{
		Topic: p.topic, Key: []byte(ev.Code), Value: value,
		Headers: []kgo.RecordHeader{{Key: "kind", Value: []byte(ev.Kind)}},
	}, func(_ *kgo.Record, err error) { done <- err })
	select {
	case err = <-done:
	case <-ctx.Done():
		// A record not yet sent fails with the context's error; one sent
		// without an answer is not failed by franz-go (that could write it
		// twice), and may still be written.
		select {
		case err = <-done:
		case <-time.After(unknownAfter):
			if p.sent.n.Load() == sentBefore {
				// No produce request left since the record was handed
				// over (the broker unreachable): not written, only not
				// yet failed by franz-go.
				err = fmt.Errorf("no produce request was sent: %w", ctx.Err())
			} else {
				err = fmt.Errorf("%w: %v", voucher.ErrPublishUnknown, ctx.Err())
			}
		}
	}
	p.obs.EventProduced(string(ev.Kind), err, time.Since(start))
	if err != nil {
		return fmt.Errorf("events: publish %s: %w", ev, err)
	}
	return nil
}

// Client is the producer's franz-go client, for the admin calls.
func (p *Producer) Client() *kgo.Client { return p.cl }

// Close flushes what is buffered (bounded by ctx) and closes the client.
func (p *Producer) Close(ctx context.Context) {
	_ = p.cl.Flush(ctx)
	p.cl.Close()
}
