package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"voucherd/internal/events"
	"voucherd/internal/metrics"
	"voucherd/internal/voucher"
)

// kafkaWritePath is FLASH_WRITE_PATH=kafka's running parts.
type kafkaWritePath struct {
	cfg      events.Config
	broker   *events.Broker // nil with KAFKA_BROKERS
	producer *events.Producer
	offsets  *events.Offsets
	consumer *events.Consumer
	stopLag  context.CancelFunc
	lagDone  chan struct{}
	logger   *slog.Logger
}

// openKafka starts the in-process broker when no KAFKA_BROKERS are named,
// creates the topics if missing and opens the producer. The consumer starts
// once the service exists (startConsumer).
func openKafka(ctx context.Context, cfg config, logger *slog.Logger, m *metrics.Metrics) (*kafkaWritePath, error) {
	k := &kafkaWritePath{logger: logger}
	brokers := cfg.KafkaBrokers
	if len(brokers) == 0 {
		b, err := events.StartBroker()
		if err != nil {
			return nil, err
		}
		k.broker, brokers = b, b.Addrs()
		logger.Warn("KAFKA_BROKERS is empty: using an in-process Kafka-protocol broker (kfake); its events live in memory and "+
			"do NOT survive a restart of this process: a flash reservation whose event is not yet applied when it stops is lost "+
			"(reconciliation returns its use). Set KAFKA_BROKERS for durable events.", "addr", strings.Join(brokers, ","))
	}
	// One publish timeout for franz-go's delivery timeout and the request's
	// wait: franz-go then fails a record it never sent while the request
	// still waits, so the request knows it surely failed (use given back)
	// rather than treating it as of unknown outcome (use held).
	k.cfg = events.Config{Brokers: brokers, InstanceID: cfg.KafkaInstance, Logger: logger, Observer: m, PublishTimeout: 3 * time.Second}
	ensureCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := events.EnsureTopics(ensureCtx, k.cfg); err != nil {
		k.close()
		return nil, fmt.Errorf("KAFKA_BROKERS: %w", err)
	}
	if cfg.Production {
		if err := events.CheckDurability(ensureCtx, k.cfg); err != nil {
			k.close()
			return nil, fmt.Errorf("KAFKA_BROKERS: %w", err)
		}
	}
	p, err := events.NewProducer(k.cfg)
	if err != nil {
		k.close()
		return nil, err
	}
	k.producer = p
	k.offsets = events.NewOffsets(k.cfg, p.Client())
	return k, nil
}

// deps are the service's dependencies for the Kafka write path.
func (k *kafkaWritePath) deps(store voucher.EventStore, cfg config) *voucher.KafkaPath {
	return &voucher.KafkaPath{
		Publisher: k.producer, Store: store, Pending: k.offsets, PublishTimeout: k.cfg.PublishTimeout,
		Lease: cfg.AdmissionLease, Faults: registeredFaults(cfg.FaultsID), Decode: events.Decode,
	}
}

// Faults are a test's hooks at the steps of kafka-mode requests and of the
// consumer (voucher.FaultStep): returning an error stops the step there, as
// a crash would.
type Faults func(ctx context.Context, step voucher.FaultStep, orderID string) error

var (
	faultsMu sync.Mutex
	faults   = map[string]Faults{}
)

// RegisterFaults makes a server started with TEST_FAULTS=id call f at each
// fault step; for tests, which start several servers in one process.
func RegisterFaults(id string, f Faults) {
	faultsMu.Lock()
	defer faultsMu.Unlock()
	faults[id] = f
}

func registeredFaults(id string) func(context.Context, voucher.FaultStep, string) error {
	if id == "" {
		return nil
	}
	faultsMu.Lock()
	defer faultsMu.Unlock()
	return faults[id]
}

// startConsumer joins the group voucher-writer and starts the lag gauge.
func (k *kafkaWritePath) startConsumer(ctx context.Context, svc *voucher.Service) error {
	applier := svc.EventApplier()
	if applier == nil {
		return errors.New("the Kafka write path needs the Redis gate")
	}
	c, err := events.StartConsumer(ctx, k.cfg, applier, k.producer.Client())
	if err != nil {
		return err
	}
	k.consumer = c
	lagCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	k.stopLag, k.lagDone = stop, make(chan struct{})
	go func() {
		defer close(k.lagDone)
		k.offsets.WatchLag(lagCtx, 5*time.Second, k.logger)
	}()
	return nil
}

// close stops the consumer (after its batch in progress), flushes the
// producer and stops the in-process broker.
func (k *kafkaWritePath) close() {
	if k.stopLag != nil {
		k.stopLag()
		<-k.lagDone
	}
	if k.consumer != nil {
		k.consumer.Stop()
	}
	if k.producer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		k.producer.Close(ctx)
		cancel()
	}
	if k.broker != nil {
		k.broker.Close()
	}
}
