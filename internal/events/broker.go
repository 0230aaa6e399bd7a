package events

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Broker is an in-process Kafka-protocol broker (franz-go's kfake) for when
// no KAFKA_BROKERS are named: the whole pipeline runs out of the box. Its
// events live in memory and do not survive a restart of the process.
type Broker struct {
	c *kfake.Cluster
}

// StartBroker starts a one-node in-process broker on a free local port.
func StartBroker() (*Broker, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("events: in-process broker: %w", err)
	}
	return &Broker{c: c}, nil
}

// Addrs are the broker's host:port addresses.
func (b *Broker) Addrs() []string { return b.c.ListenAddrs() }

// Close stops the broker; its events are gone.
func (b *Broker) Close() { b.c.Close() }
