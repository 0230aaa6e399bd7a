package events

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/voucher"
)

// Producer publishes the gate's decisions: an idempotent producer with
// acks=all, answering only once the broker acknowledged (or surely refused)
// the event. It implements voucher.EventPublisher.
type Producer struct {
	cl    *kgo.Client
	topic string
	obs   Observer
}

var _ voucher.EventPublisher = (*Producer)(nil)

// NewProducer opens a producer client.
func NewProducer(cfg Config) (*Producer, error) {
	cfg = cfg.withDefaults()
	cl, err := kgo.NewClient(
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
	return &Producer{cl: cl, topic: cfg.Topic, obs: cfg.Observer}, nil
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
	start := time.Now()
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
			err = fmt.Errorf("%w: %v", voucher.ErrPublishUnknown, ctx.Err())
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
