package events_test

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"voucherd/internal/events"
)

// TestCheckDurability_RefusesTopicsThatCouldLoseAnAcknowledgedEvent: the
// check APP_ENV=production runs at start (issue 30, item 8): topics with a
// replication factor under 3 or a min.insync.replicas under 2 (the broker's
// default counts as 1) are refused, with both numbers named.
func TestCheckDurability_RefusesTopicsThatCouldLoseAnAcknowledgedEvent(t *testing.T) {
	ctx := context.Background()
	cluster := func(t *testing.T, brokers int) events.Config {
		t.Helper()
		c, err := kfake.NewCluster(kfake.NumBrokers(brokers))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return events.Config{Brokers: c.ListenAddrs()}
	}
	create := func(t *testing.T, cfg events.Config, rf int16, configs map[string]*string) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		for _, name := range []string{events.DefaultTopic, events.DefaultDeadLetterTopic} {
			resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, rf, configs, name)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
		}
	}

	one := cluster(t, 1)
	if err := events.EnsureTopics(ctx, one); err != nil {
		t.Fatal(err)
	}
	err := events.CheckDurability(ctx, one)
	if err == nil || !strings.Contains(err.Error(), "replication factor 1 and min.insync.replicas 1") || !strings.Contains(err.Error(), "at least 3") {
		t.Errorf("one broker: %v, want a refusal naming replication factor 1 and min.insync.replicas 1", err)
	}

	// kfake keeps one replica of every partition whatever the topic asks
	// for, so a replication factor of 3 cannot be shown accepted here; the
	// topic's own min.insync.replicas is read, and the default counts as 1.
	two := "2"
	durable := cluster(t, 3)
	create(t, durable, 3, map[string]*string{"min.insync.replicas": &two})
	if err := events.CheckDurability(ctx, durable); err == nil || !strings.Contains(err.Error(), "replication factor 1 and min.insync.replicas 2") {
		t.Errorf("kfake's one replica, min.insync.replicas 2: %v, want refused for the replication factor alone", err)
	}
	defaults := cluster(t, 3)
	create(t, defaults, 3, nil)
	if err := events.CheckDurability(ctx, defaults); err == nil || !strings.Contains(err.Error(), "min.insync.replicas 1") {
		t.Errorf("the default min.insync.replicas: %v, want refused", err)
	}
}
