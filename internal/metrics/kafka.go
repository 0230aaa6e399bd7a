package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voucherd/internal/events"
)

// kafkaMetrics are the Kafka write path's figures: produce and consume
// rates, consumer lag and dead letters.
type kafkaMetrics struct {
	produced       *prometheus.CounterVec
	produceLatency *prometheus.HistogramVec
	consumed       *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec
	lag            prometheus.Gauge
}

var _ events.Observer = (*Metrics)(nil)

func newKafkaMetrics(reg *prometheus.Registry) kafkaMetrics {
	k := kafkaMetrics{
		produced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voucher_events_produced_total", Help: "Events published to Kafka by kind and result (ok, or error when the broker did not acknowledge).",
		}, []string{"kind", "result"}),
		produceLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "voucher_event_produce_duration_seconds", Help: "Time from publish to the broker's acknowledgement (acks=all), by kind.", Buckets: latencyBuckets,
		}, []string{"kind"}),
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voucher_events_consumed_total", Help: "Events handled by the consumer by kind and outcome (applied or dead-letter).",
		}, []string{"kind", "outcome"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voucher_dead_letters_total", Help: "Events the database refused (or that could not be read), sent to the dead-letter topic and table.",
		}, []string{"kind"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "voucher_consumer_lag", Help: "Events on the topic not yet committed by the consumer group voucher-writer (read from the broker).",
		}),
	}
	reg.MustRegister(k.produced, k.produceLatency, k.consumed, k.deadLetters, k.lag)
	// Series exist from the start, so rate() and increase() see the first event.
	for _, kind := range []string{"reserved", "confirmed", "released"} {
		k.produced.WithLabelValues(kind, "ok")
		k.consumed.WithLabelValues(kind, "applied")
		k.deadLetters.WithLabelValues(kind)
	}
	return k
}

// EventProduced implements events.Observer.
func (m *Metrics) EventProduced(kind string, err error, d time.Duration) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.kafka.produced.WithLabelValues(kind, result).Inc()
	m.kafka.produceLatency.WithLabelValues(kind).Observe(d.Seconds())
}

// EventConsumed implements events.Observer.
func (m *Metrics) EventConsumed(kind, outcome string) {
	m.kafka.consumed.WithLabelValues(kind, outcome).Inc()
}

// DeadLettered implements events.Observer.
func (m *Metrics) DeadLettered(kind string) { m.kafka.deadLetters.WithLabelValues(kind).Inc() }

// ConsumerLag implements events.Observer.
func (m *Metrics) ConsumerLag(n int64) { m.kafka.lag.Set(float64(n)) }
