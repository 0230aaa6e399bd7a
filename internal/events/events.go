// Package events is the Kafka write path of flash vouchers
// (FLASH_WRITE_PATH=kafka), over franz-go: the producer that publishes the
// gate's decisions, the consumer (group voucher-writer) that applies them to
// PostgreSQL one transaction each, the dead-letter topic for events the
// database refuses, the wait for events in flight (Settle) and, when no
// brokers are named, an in-process Kafka-protocol broker (kfake).
//
// One topic carries every event, keyed by voucher code, so one voucher's
// events stay in one partition in the order the broker acknowledged them.
package events

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults of Config.
const (
	DefaultTopic           = "voucher-reservations"
	DefaultDeadLetterTopic = "voucher-reservations-dead-letter"
	DefaultGroup           = "voucher-writer"
	defaultPartitions      = 8
	defaultPublishTimeout  = 3 * time.Second
)

// Config says where the events go.
type Config struct {
	Brokers         []string
	Topic           string // default voucher-reservations
	DeadLetterTopic string // default voucher-reservations-dead-letter
	Group           string // default voucher-writer
	// InstanceID, when set, makes this process a static member of the
	// consumer group (KIP-345): restarted with the same id, it takes its
	// old member's place and partitions at once instead of waiting for the
	// old one to time out, and a member left behind by a kill during a
	// rebalance is fenced by its return. Unique per live instance.
	InstanceID string
	// Partitions of the topic when it is created here; default 8.
	Partitions int32
	// PublishTimeout bounds a publish (and is franz-go's record delivery
	// timeout); default 3s.
	PublishTimeout time.Duration
	Logger         *slog.Logger
	Observer       Observer // nil: none
}

func (c Config) withDefaults() Config {
	c.Topic = cmp.Or(c.Topic, DefaultTopic)
	c.DeadLetterTopic = cmp.Or(c.DeadLetterTopic, DefaultDeadLetterTopic)
	c.Group = cmp.Or(c.Group, DefaultGroup)
	c.Partitions = cmp.Or(c.Partitions, defaultPartitions)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, defaultPublishTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	return c
}

// Observer receives the figures of the write path; internal/metrics
// implements it.
type Observer interface {
	// EventProduced records one publish (err nil: acknowledged).
	EventProduced(kind string, err error, d time.Duration)
	// EventConsumed records one event handled by the consumer: outcome
	// "applied" or "dead-letter".
	EventConsumed(kind, outcome string)
	// DeadLettered records an event sent to the dead letters.
	DeadLettered(kind string)
	// ConsumerLag records how many events the group has not committed yet.
	ConsumerLag(n int64)
}

type nopObserver struct{}

func (nopObserver) EventProduced(string, error, time.Duration) {}
func (nopObserver) EventConsumed(string, string)               {}
func (nopObserver) DeadLettered(string)                        {}
func (nopObserver) ConsumerLag(int64)                          {}

// EnsureTopics creates the topic and the dead-letter topic unless they exist.
func EnsureTopics(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	return withAdmin(cfg, func(adm *kadm.Client) error { return ensureTopics(ctx, adm, cfg) })
}

// withAdmin runs fn with an admin client of cfg's brokers, closed after.
func withAdmin(cfg Config, fn func(*kadm.Client) error) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	defer cl.Close()
	return fn(kadm.NewClient(cl))
}

func ensureTopics(ctx context.Context, adm *kadm.Client, cfg Config) error {
	for _, t := range []struct {
		name       string
		partitions int32
	}{{cfg.Topic, cfg.Partitions}, {cfg.DeadLetterTopic, 1}} {
		// -1: the brokers' default replication factor.
		resp, err := adm.CreateTopic(ctx, t.partitions, -1, nil, t.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("events: create topic %s: %w", t.name, err)
		}
	}
	return nil
}

// Durability a production deployment needs of its topics: an event
// acknowledged to a reserve (acks=all) is on at least MinInSyncReplicas
// brokers, and survives the loss of one of ReplicationFactor.
const (
	MinReplicationFactor = 3
	MinInSyncReplicas    = 2
)

// CheckDurability refuses topics that could lose an acknowledged event: a
// replication factor under MinReplicationFactor or a min.insync.replicas
// under MinInSyncReplicas (a broker default not reported counts as
// Kafka's, 1). An answered 201 in kafka mode is only as durable as its
// event.
func CheckDurability(ctx context.Context, cfg Config) error {
	cfg = cfg.withDefaults()
	return withAdmin(cfg, func(adm *kadm.Client) error { return checkDurability(ctx, adm, cfg) })
}

func checkDurability(ctx context.Context, adm *kadm.Client, cfg Config) error {
	topics := []string{cfg.Topic, cfg.DeadLetterTopic}
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("events: describe topics: %w", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		return fmt.Errorf("events: describe topic configs: %w", err)
	}
	var problems []string
	for _, name := range topics {
		d, ok := details[name]
		if !ok || d.Err != nil {
			return fmt.Errorf("events: topic %s: not found (%v)", name, d.Err)
		}
		rf := len(d.Partitions)
		for _, p := range d.Partitions {
			rf = min(rf, len(p.Replicas))
		}
		isr := 1
		if rc, err := configs.On(name, nil); err == nil {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" && c.Value != nil {
					if n, err := strconv.Atoi(*c.Value); err == nil {
						isr = n
					}
				}
			}
		}
		if rf < MinReplicationFactor || isr < MinInSyncReplicas {
			problems = append(problems, fmt.Sprintf("topic %s has replication factor %d and min.insync.replicas %d", name, rf, isr))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s; with APP_ENV=production each needs a replication factor of at least %d and min.insync.replicas of at least %d, so that an acknowledged event (an answered reservation) survives the loss of a broker",
			strings.Join(problems, "; "), MinReplicationFactor, MinInSyncReplicas)
	}
	return nil
}
