// Package metrics exposes what operators watch on /metrics (Prometheus):
// reserve outcomes and latency per path, gate calls, database writes,
// expiry, drift, HTTP traffic and the Kafka write path (kafka.go). It
// implements voucher.Observer and events.Observer.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"voucherd/internal/voucher"
)

// Metrics is the service's Prometheus registry and its instruments.
type Metrics struct {
	Registry *prometheus.Registry

	reserves       *prometheus.CounterVec
	reserveLatency *prometheus.HistogramVec
	gateCalls      *prometheus.CounterVec
	gateLatency    *prometheus.HistogramVec
	databaseWrites *prometheus.CounterVec
	expired        prometheus.Counter
	rollbacks      *prometheus.CounterVec
	gateDrift      *prometheus.GaugeVec
	driftAlert     *prometheus.GaugeVec
	ordersOnlyGate *prometheus.GaugeVec
	httpRequests   *prometheus.CounterVec
	httpLatency    *prometheus.HistogramVec
	httpShed       *prometheus.CounterVec
	kafka          kafkaMetrics   // kafka.go
	webhook        webhookMetrics // webhook.go

	// The children of the per-request instruments, by label values
	// (cached, see children).
	reserveChildren  children[reserveLabels, reserveInstruments]
	gateChildren     children[gateLabels, gateInstruments]
	databaseChildren children[string, prometheus.Counter]
}

type reserveLabels struct {
	outcome voucher.ErrorCode
	path    voucher.Path
}

type reserveInstruments struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

type gateLabels struct {
	op     string
	failed bool
}

type gateInstruments struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

var _ voucher.Observer = (*Metrics)(nil)

// latencyBuckets resolve the sub-millisecond answers of the gate and the
// 100 ms p99 target alike.
var latencyBuckets = []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}

// New registers every instrument on a fresh registry, with Go and process
// collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	m := &Metrics{Registry: reg}
	m.reserves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voucher_reserve_total", Help: "Reserve calls by outcome (ok or the error code) and path.",
	}, []string{"outcome", "path"})
	m.reserveLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "voucher_reserve_duration_seconds", Help: "Reserve latency in the service, by path.", Buckets: latencyBuckets,
	}, []string{"path"})
	m.gateCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voucher_gate_calls_total", Help: "Redis gate calls by operation and result (ok or error).",
	}, []string{"op", "result"})
	m.gateLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "voucher_gate_call_duration_seconds", Help: "Redis gate call latency by operation.", Buckets: latencyBuckets,
	}, []string{"op"})
	m.databaseWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voucher_database_writes_total", Help: "Write transactions sent to PostgreSQL by operation.",
	}, []string{"op"})
	m.expired = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "voucher_reservations_expired_total", Help: "Reservations released by expiry.",
	})
	m.rollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voucher_rollback_total", Help: "Rollbacks of confirmed uses by outcome (ok: given back, unchanged: rolled back before, or the error code).",
	}, []string{"outcome"})
	m.gateDrift = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "voucher_gate_drift", Help: "Latest gate drift per flash voucher: gate remaining minus what the database allows.",
	}, []string{"voucher"})
	m.driftAlert = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "voucher_gate_drift_alert", Help: "1 while a voucher's drift has persisted past one reconciliation interval.",
	}, []string{"voucher"})
	m.ordersOnlyGate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "voucher_gate_orders_in_flight", Help: "Orders the gate admitted that the database does not hold yet, at the latest reconciliation.",
	}, []string{"voucher"})
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voucher_http_requests_total", Help: "HTTP requests by route and status.",
	}, []string{"route", "status"})
	m.httpLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "voucher_http_request_duration_seconds", Help: "HTTP latency by route.", Buckets: latencyBuckets,
	}, []string{"route"})
	m.httpShed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voucher_http_shed_total", Help: "Storefront requests answered 503 UNAVAILABLE at once because the server was over its shedding limit, by route.",
	}, []string{"route"})
	for _, c := range []prometheus.Collector{m.httpShed, m.reserves, m.reserveLatency, m.gateCalls, m.gateLatency, m.databaseWrites,
		m.expired, m.rollbacks, m.gateDrift, m.driftAlert, m.ordersOnlyGate, m.httpRequests, m.httpLatency} {
		f(c)
	}
	m.kafka = newKafkaMetrics(reg)
	m.webhooks()
	m.reserveChildren.create = func(l reserveLabels) reserveInstruments {
		o := "ok"
		if l.outcome != "" {
			o = string(l.outcome)
		}
		return reserveInstruments{m.reserves.WithLabelValues(o, string(l.path)), m.reserveLatency.WithLabelValues(string(l.path))}
	}
	m.gateChildren.create = func(l gateLabels) gateInstruments {
		result := "ok"
		if l.failed {
			result = "error"
		}
		return gateInstruments{m.gateCalls.WithLabelValues(l.op, result), m.gateLatency.WithLabelValues(l.op)}
	}
	m.databaseChildren.create = func(op string) prometheus.Counter { return m.databaseWrites.WithLabelValues(op) }
	return m
}

// Handler serves the registry for GET /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{Registry: m.Registry})
}

// ReserveDone implements voucher.Observer.
func (m *Metrics) ReserveDone(path voucher.Path, outcome voucher.ErrorCode, d time.Duration) {
	c := m.reserveChildren.get(reserveLabels{outcome, path})
	c.count.Inc()
	c.latency.Observe(d.Seconds())
}

// GateCall implements voucher.Observer.
func (m *Metrics) GateCall(op string, err error, d time.Duration) {
	c := m.gateChildren.get(gateLabels{op, err != nil})
	c.count.Inc()
	c.latency.Observe(d.Seconds())
}

// DatabaseWrite implements voucher.Observer.
func (m *Metrics) DatabaseWrite(op string) { m.databaseChildren.get(op).Inc() }

// ReservationsExpired implements voucher.Observer.
func (m *Metrics) ReservationsExpired(n int) { m.expired.Add(float64(n)) }

// RollbackDone implements voucher.Observer. Rollbacks are rare (refunds),
// so the vector's own lookup is cheap enough.
func (m *Metrics) RollbackDone(outcome string) { m.rollbacks.WithLabelValues(outcome).Inc() }

// DriftChecked implements voucher.Observer.
func (m *Metrics) DriftChecked(d voucher.DriftReport) {
	m.gateDrift.WithLabelValues(d.VoucherCode).Set(float64(d.Drift))
	alert := 0.0
	if d.Alert {
		alert = 1
	}
	m.driftAlert.WithLabelValues(d.VoucherCode).Set(alert)
	m.ordersOnlyGate.WithLabelValues(d.VoucherCode).Set(float64(d.InFlight))
}

// ObserveHTTP counts and times the requests of one route. The route's
// counter is resolved once per status (children), not per request.
func (m *Metrics) ObserveHTTP(route string, next http.Handler) http.Handler {
	latency := m.httpLatency.WithLabelValues(route)
	counts := &children[int, prometheus.Counter]{create: func(status int) prometheus.Counter {
		return m.httpRequests.WithLabelValues(route, strconv.Itoa(status))
	}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		latency.Observe(time.Since(start).Seconds())
		counts.get(sw.status).Inc()
	})
}

// Shed counts a request of route refused by the load shedding (server
// Shedding.Shed).
func (m *Metrics) Shed(route string) { m.httpShed.WithLabelValues(route).Inc() }

// WatchShedding exposes the shedding limit and the storefront requests in
// service as gauges, read at each scrape.
func (m *Metrics) WatchShedding(limit, inFlight func() int) {
	m.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "voucher_shed_limit", Help: "The load shedding's current limit on storefront requests served at once (it adapts to their latency).",
		}, func() float64 { return float64(limit()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "voucher_shed_in_flight", Help: "Storefront requests in service under the load shedding's limit.",
		}, func() float64 { return float64(inFlight()) }),
	)
}

// children caches the children of metric vectors by label values: a vector's
// WithLabelValues checks and hashes the values and takes the vector's lock on
// every call, which the per-request instruments paid on every request. A
// child is created (create) the first time its labels are seen, as
// WithLabelValues did, so /metrics lists the same series. Reads are a lookup
// in an immutable map; a new label set copies the map (label sets are few
// and fixed: codes, paths, operations, statuses). Nothing deletes or resets
// series of these vectors, so a cached child never goes stale.
type children[K comparable, V any] struct {
	create func(K) V
	mu     sync.Mutex
	known  atomic.Pointer[map[K]V]
}

func (c *children[K, V]) get(k K) V {
	if known := c.known.Load(); known != nil {
		if v, ok := (*known)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if known := c.known.Load(); known != nil {
		old = *known
	}
	if v, ok := old[k]; ok {
		return v
	}
	v := c.create(k)
	next := make(map[K]V, len(old)+1)
	for key, val := range old {
		next[key] = val
	}
	next[k] = v
	c.known.Store(&next)
	return v
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
