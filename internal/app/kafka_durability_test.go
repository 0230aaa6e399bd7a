package app

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"voucherd/internal/testdb"
	"voucherd/internal/testenv"
)

// TestServe_InProductionRefusesATopicThatCouldLoseAnAcknowledgedEvent: with
// APP_ENV=production and the kafka write path, a broker whose topics have
// one replica stops the start, naming the numbers and what they should be.
func TestServe_InProductionRefusesATopicThatCouldLoseAnAcknowledgedEvent(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	env := map[string]string{
		"APP_ENV": "production", "FLASH_WRITE_PATH": "kafka", "KAFKA_BROKERS": strings.Join(c.ListenAddrs(), ","),
		"HTTP_ADDR":         "127.0.0.1:0",
		"DATABASE_URL":      testdb.OwnMigrated(t, testenv.DatabaseURL()),
		"REDIS_URL":         testenv.RedisURL(),
		"STOREFRONT_TOKENS": "durability-storefront-token-0123456789", "ADMIN_TOKENS": "durability-admin-token-0123456789abc",
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	err = Run(ctx, []string{"serve"}, func(k string) string { return env[k] }, &stdout, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "replication factor 1") || !strings.Contains(err.Error(), "at least 3") {
		t.Fatalf("serve in production on a one-replica topic: %v (stdout %q), want a refusal naming the replication factor", err, stdout.String())
	}
	if strings.Contains(stdout.String(), "listening") {
		t.Errorf("the server listened: %q", stdout.String())
	}
}
