package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"

	"voucherd/internal/events"
)

// brokerSettings are `voucherd broker`'s own settings (README, "Settings").
type brokerSettings struct {
	Addr    string // BROKER_ADDR: host:port to listen on
	DataDir string // BROKER_DATA_DIR: empty keeps the events in memory only
}

func loadBrokerSettings(getenv func(string) string) (brokerSettings, error) {
	s := brokerSettings{Addr: or(getenv("BROKER_ADDR"), "127.0.0.1:9092"), DataDir: or(getenv("BROKER_DATA_DIR"), "")}
	host, port, err := net.SplitHostPort(s.Addr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 || host == "" {
		return s, errors.New("BROKER_ADDR must be host:port, such as 127.0.0.1:9092")
	}
	return s, nil
}

// runBroker is `voucherd broker`: franz-go's kfake as a one-node
// Kafka-protocol broker in its own process, so the events of
// FLASH_WRITE_PATH=kafka outlive a crash of `voucherd serve` (the in-process
// broker dies with it). It creates the service's topics, prints its address
// and runs until ctx is cancelled (SIGTERM, Ctrl-C). A development broker:
// one node, no replication; with BROKER_DATA_DIR it also survives its own
// restart (every batch fsynced).
func runBroker(ctx context.Context, getenv func(string) string, logger *slog.Logger, stdout io.Writer) error {
	s, err := loadBrokerSettings(getenv)
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		// kfake listens on 127.0.0.1 unless told otherwise; the broker
		// advertises the address it listens on, so clients must reach it there.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, s.Addr) }),
		// The partitions `serve` would create (events.EnsureTopics finds
		// them and goes on).
		kfake.SeedTopics(8, events.DefaultTopic),
		kfake.SeedTopics(1, events.DefaultDeadLetterTopic),
	}
	if s.DataDir != "" {
		opts = append(opts, kfake.DataDir(s.DataDir), kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("broker: BROKER_ADDR %s: %w", s.Addr, err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	fmt.Fprintf(stdout, "voucherd broker listening on %s\n", addr)
	fmt.Fprintf(stdout, "use it with KAFKA_BROKERS=%s FLASH_WRITE_PATH=kafka voucherd serve\n", addr)
	logger.Info("broker", "addr", addr, "data_dir", s.DataDir, "persistent", s.DataDir != "")
	<-ctx.Done()
	logger.Info("broker stopping")
	return nil
}
