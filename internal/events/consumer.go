package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/voucher"
)

// Applier writes events to the database; *voucher.EventApplier implements it.
type Applier interface {
	// ApplyEvent applies one event in one transaction: *voucher.EventRefusedError
	// when the database refuses it, any other error is transient.
	ApplyEvent(ctx context.Context, ev voucher.Event) error
	// ApplyReservedBatch applies reserved events of one voucher in one
	// transaction; applied[i] false: apply that one with ApplyEvent. Any
	// error means none was applied.
	ApplyReservedBatch(ctx context.Context, evs []voucher.Event) (applied []bool, err error)
	// SaveDeadLetter keeps a refused event for operators.
	SaveDeadLetter(ctx context.Context, dl voucher.DeadLetter) error
}

// Consumer is the group voucher-writer: it applies each event in one
// database transaction and commits the offsets only after the transactions
// committed, so a crash replays events, and a replay changes nothing (the
// events are idempotent). An event the database refuses goes to the
// dead-letter topic and the dead_letter table, is counted and logged at
// ERROR, and is committed like the others.
type Consumer struct {
	cl      *kgo.Client
	dlq     *kgo.Client
	applier Applier
	cfg     Config
	log     *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
}

// StartConsumer joins the group and applies events in the background until
// Stop. dlq publishes dead letters (the producer's client).
func StartConsumer(ctx context.Context, cfg Config, applier Applier, dlq *kgo.Client) (*Consumer, error) {
	cfg = cfg.withDefaults()
	logger := cfg.Logger.With("component", "kafka-consumer")
	// The group's changes, for the record: a consumer that stops applying
	// (events "still to apply" pass after pass) is read from them.
	groupChange := func(what string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
			if len(parts) > 0 {
				logger.InfoContext(ctx, "partitions "+what, "partitions", parts)
			}
		}
	}
	opts := []kgo.Opt{
		kgo.OnPartitionsAssigned(groupChange("assigned")),
		kgo.OnPartitionsRevoked(groupChange("revoked")),
		kgo.OnPartitionsLost(groupChange("lost")),
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// No rebalance while a batch is applied and committed: a partition
		// moves to another instance only with its offsets committed.
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(time.Second),
		// A member that died (a SIGKILL of the server) holds its partitions
		// until its session times out: 10 s rather than franz-go's 45 s, so
		// the events it did not apply are taken over within seconds.
		// Heartbeats go on in the background while a batch is applied.
		kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(time.Second),
		// A rebalance waits for every member it knows to rejoin, up to the
		// rebalance timeout: a member killed during one held every
		// partition of the group for franz-go's 60 s (explorer seed 25:
		// both instances killed and restarted, nothing applied for 70 s,
		// then four minutes in another run). A live member rejoins within
		// a batch's turn (maxTurn, 2 s) and its commit (at most 10 s).
		// docs/operations.md: what a kill during a rebalance costs, and a
		// stall of the development broker (kfake) of its own.
		kgo.RebalanceTimeout(20 * time.Second),
	}
	if cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(cfg.InstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("events: consumer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Consumer{cl: cl, dlq: dlq, applier: applier, cfg: cfg, log: logger, cancel: cancel, done: make(chan struct{})}
	go c.run(ctx)
	return c, nil
}

// Stop finishes the batch in progress (its transactions and commit), leaves
// the group and closes the client.
func (c *Consumer) Stop() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

func (c *Consumer) run(ctx context.Context) {
	defer close(c.done)
	// A poll blocks rebalances until AllowRebalance, and leaving the group
	// at Close is one.
	defer c.cl.AllowRebalance()
	for {
		fetches := c.cl.PollRecords(ctx, 500)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.log.WarnContext(ctx, "fetch failed", "topic", topic, "partition", p, "err", err)
			}
		})
		// Partitions in parallel, each in order. A partition whose event
		// keeps failing gives up its turn after maxTurn: what it applied is
		// committed with the other partitions', and it is fetched again from
		// its first unapplied record, so one voucher's stuck event holds up
		// its own partition only.
		turn, endTurn := context.WithTimeout(ctx, maxTurn)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var applied []*kgo.Record
		rewind := map[string]map[int32]kgo.EpochOffset{}
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				var last, next *kgo.Record
				for recs := p.Records; len(recs) > 0; {
					n, err := c.applyNext(ctx, turn, recs)
					if n > 0 {
						last = recs[n-1]
					}
					if err != nil {
						next = recs[n] // stopping, or its turn is over: applied again later
						break
					}
					recs = recs[n:]
				}
				mu.Lock()
				defer mu.Unlock()
				if last != nil {
					applied = append(applied, last)
				}
				if next != nil && ctx.Err() == nil {
					if rewind[next.Topic] == nil {
						rewind[next.Topic] = map[int32]kgo.EpochOffset{}
					}
					rewind[next.Topic][next.Partition] = kgo.EpochOffset{Epoch: next.LeaderEpoch, Offset: next.Offset}
				}
			}()
		})
		wg.Wait()
		endTurn()
		if len(applied) > 0 {
			// After the transactions: a crash before this line replays them.
			commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := c.cl.CommitRecords(commitCtx, applied...); err != nil {
				c.log.WarnContext(ctx, "offsets not committed; the events will be applied again (harmlessly)", "err", err)
			}
			cancel()
		}
		// Before AllowRebalance, as franz-go asks of a group consumer.
		c.cl.SetOffsets(rewind)
		c.cl.AllowRebalance()
	}
}

// maxBatch bounds the reserved events applied in one transaction.
const maxBatch = 500

// maxTurn bounds how long a poll waits for a partition whose event keeps
// failing before the other partitions' progress is committed.
const maxTurn = 2 * time.Second

// applyNext applies the records at the head of recs and says how many it
// applied (or dead-lettered). A run of reserved events of one voucher, the
// bulk of a sale, goes in one transaction; anything else, and a run the
// database does not take whole, one record at a time, in order. An error
// means ctx ended: recs[n:] are not applied.
func (c *Consumer) applyNext(ctx, turn context.Context, recs []*kgo.Record) (int, error) {
	head, err := Decode(recs[0].Value)
	if err != nil {
		return c.one(c.deadLetter(ctx, turn, recs[0], head, "malformed event: "+err.Error()))
	}
	run := []voucher.Event{head}
	if head.Kind == voucher.EventReserved {
		for _, rec := range recs[1:min(len(recs), maxBatch)] {
			ev, err := Decode(rec.Value)
			if err != nil || ev.Kind != voucher.EventReserved || ev.Code != head.Code {
				break
			}
			run = append(run, ev)
		}
	}
	if len(run) == 1 {
		return c.one(c.handle(ctx, turn, recs[0], head))
	}
	applied, err := c.applier.ApplyReservedBatch(ctx, run)
	for i, rec := range recs[:len(run)] {
		if err == nil && applied[i] {
			c.cfg.Observer.EventConsumed(string(voucher.EventReserved), "applied")
			continue
		}
		// Held already (ApplyEvent checks it is the same order), or the
		// batch failed: this one alone, retried or dead-lettered.
		if herr := c.handle(ctx, turn, rec, run[i]); herr != nil {
			return i, herr
		}
	}
	return len(run), nil
}

// one is applyNext's answer for a single record.
func (c *Consumer) one(err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// handle applies one record's event, retrying transient failures until turn
// ends (returning its error: the record is not committed).
func (c *Consumer) handle(ctx, turn context.Context, rec *kgo.Record, ev voucher.Event) error {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := c.applier.ApplyEvent(ctx, ev)
		if err == nil {
			c.cfg.Observer.EventConsumed(string(ev.Kind), "applied")
			return nil
		}
		var refused *voucher.EventRefusedError
		if errors.As(err, &refused) {
			return c.deadLetter(ctx, turn, rec, ev, refused.Reason)
		}
		if turn.Err() != nil {
			return turn.Err()
		}
		if attempt == 1 || attempt%20 == 0 {
			c.log.WarnContext(ctx, "event not applied; retrying", "event", ev.String(), "attempt", attempt, "err", err)
		}
		if err := sleep(turn, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// deadLetter sends a refused event to the dead-letter topic and the
// dead_letter table, retrying until both hold it or ctx ends.
func (c *Consumer) deadLetter(ctx, turn context.Context, rec *kgo.Record, ev voucher.Event, reason string) error {
	kind := string(ev.Kind)
	if kind == "" {
		kind = "unknown"
	}
	c.log.ErrorContext(ctx, "event refused by the database; sent to the dead letters",
		"event", ev.String(), "reason", reason, "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset)
	dl := voucher.DeadLetter{
		EventID: ev.ID, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		VoucherCode: ev.Code, OrderID: ev.OrderID, Kind: kind, Reason: reason, Payload: string(rec.Value),
	}
	if ev.Kind != "" {
		dl.Event = &ev
	}
	if dl.EventID == "" {
		dl.EventID = rec.Topic + "/" + strconv.Itoa(int(rec.Partition)) + "/" + strconv.FormatInt(rec.Offset, 10)
	}
	out := &kgo.Record{
		Topic: c.cfg.DeadLetterTopic, Key: rec.Key, Value: rec.Value,
		Headers: append(append([]kgo.RecordHeader(nil), rec.Headers...),
			kgo.RecordHeader{Key: "reason", Value: []byte(reason)},
			kgo.RecordHeader{Key: "source", Value: []byte(rec.Topic + "/" + strconv.Itoa(int(rec.Partition)) + "/" + strconv.FormatInt(rec.Offset, 10))}),
	}
	backoff := 50 * time.Millisecond
	for {
		err := c.dlq.ProduceSync(ctx, out).FirstErr()
		if err == nil {
			err = c.applier.SaveDeadLetter(ctx, dl)
		}
		if err == nil {
			break
		}
		if turn.Err() != nil {
			return turn.Err()
		}
		c.log.WarnContext(ctx, "dead letter not stored yet; retrying", "event", ev.String(), "err", err)
		if err := sleep(turn, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	c.cfg.Observer.DeadLettered(kind)
	c.cfg.Observer.EventConsumed(kind, "dead-letter")
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
