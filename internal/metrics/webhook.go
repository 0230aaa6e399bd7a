package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"voucherd/internal/voucher"
)

// webhookMetrics: deliveries by outcome, and the backlog as the delivery
// worker last read it (pending deliveries, the oldest's age, endpoints the
// server disabled).
type webhookMetrics struct {
	once       sync.Once
	deliveries *prometheus.CounterVec
	disabled   prometheus.Counter
	pending    prometheus.Gauge
	oldest     prometheus.Gauge
	off        prometheus.Gauge
}

func (m *Metrics) webhooks() *webhookMetrics {
	w := &m.webhook
	w.once.Do(func() {
		w.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voucher_webhook_deliveries_total", Help: "Webhook delivery attempts by outcome: delivered, retry (failed, to be tried again), failed (retries spent).",
		}, []string{"outcome"})
		w.disabled = prometheus.NewCounter(prometheus.CounterOpts{
			Name: "voucher_webhook_endpoints_disabled_total", Help: "Webhook endpoints this instance disabled after they failed every delivery for the retry window.",
		})
		w.pending = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "voucher_webhook_deliveries_pending", Help: "Webhook deliveries not yet delivered nor given up (all instances).",
		})
		w.oldest = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "voucher_webhook_oldest_pending_seconds", Help: "Age of the oldest pending webhook delivery.",
		})
		w.off = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "voucher_webhook_endpoints_disabled", Help: "Webhook endpoints the server disabled (failing for the retry window) and no admin enabled again: alert on > 0.",
		})
		m.Registry.MustRegister(w.deliveries, w.disabled, w.pending, w.oldest, w.off)
	})
	return w
}

// WebhookAttempted counts one delivery attempt by outcome.
func (m *Metrics) WebhookAttempted(outcome string) {
	m.webhooks().deliveries.WithLabelValues(outcome).Inc()
}

// WebhookEndpointDisabled counts an endpoint this instance disabled.
func (m *Metrics) WebhookEndpointDisabled() { m.webhooks().disabled.Inc() }

// WebhookBacklog sets the backlog gauges.
func (m *Metrics) WebhookBacklog(b voucher.WebhookBacklog) {
	w := m.webhooks()
	w.pending.Set(float64(b.Pending))
	w.oldest.Set(b.OldestPending.Seconds())
	w.off.Set(float64(b.DisabledEndpoints))
}
