package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"voucherd/internal/voucher"
)

// series returns the value of every series of one metric family, by its
// labels ("name=value,name=value"): a counter's value or a histogram's count.
func series(t *testing.T, m *Metrics, family string) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, s := range f.GetMetric() {
			key := ""
			for i, l := range s.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += l.GetName() + "=" + l.GetValue()
			}
			out[key] = value(s)
		}
	}
	return out
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return s.GetGauge().GetValue()
}

func TestObserveHTTP_CountsEveryStatusOfTheRoute(t *testing.T) {
	m := New()
	status := http.StatusCreated
	h := m.ObserveHTTP("POST /x", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	other := m.ObserveHTTP("GET /y", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if got := series(t, m, "voucher_http_requests_total"); len(got) != 0 {
		t.Errorf("series before any request: %v", got)
	}
	for _, s := range []int{201, 201, 409, 201, 409, 409, 409, 500} {
		status = s
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/x", nil))
	}
	other.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/y", nil))
	want := map[string]float64{"route=POST /x,status=201": 3, "route=POST /x,status=409": 4, "route=POST /x,status=500": 1, "route=GET /y,status=200": 1}
	got := series(t, m, "voucher_http_requests_total")
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if lat := series(t, m, "voucher_http_request_duration_seconds"); lat["route=POST /x"] != 8 || lat["route=GET /y"] != 1 {
		t.Errorf("latency counts %v", lat)
	}
}

func TestObserver_CountsByLabels(t *testing.T) {
	m := New()
	for range 3 {
		m.ReserveDone(voucher.PathGateSync, voucher.OutOfStock, time.Millisecond)
	}
	m.ReserveDone(voucher.PathGateSync, "", time.Millisecond)
	m.ReserveDone(voucher.PathDatabase, "", time.Millisecond)
	m.GateCall("reserve", nil, time.Millisecond)
	m.GateCall("reserve", http.ErrAbortHandler, time.Millisecond)
	m.GateCall("reserve", nil, time.Millisecond)
	m.DatabaseWrite("reserve")
	m.DatabaseWrite("reserve")
	m.DatabaseWrite("confirm")
	for family, want := range map[string]map[string]float64{
		"voucher_reserve_total": {
			"outcome=OUT_OF_STOCK,path=gate-sync": 3, "outcome=ok,path=gate-sync": 1, "outcome=ok,path=database": 1,
		},
		"voucher_reserve_duration_seconds":   {"path=gate-sync": 4, "path=database": 1},
		"voucher_gate_calls_total":           {"op=reserve,result=ok": 2, "op=reserve,result=error": 1},
		"voucher_gate_call_duration_seconds": {"op=reserve": 3},
		"voucher_database_writes_total":      {"op=reserve": 2, "op=confirm": 1},
	} {
		got := series(t, m, family)
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", family, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s{%s} = %v, want %v", family, k, got[k], v)
			}
		}
	}
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkObserveHTTP is the metrics middleware around a handler that does
// nothing but answer 409, and the observer calls of one reserve.
func BenchmarkObserveHTTP(b *testing.B) {
	m := New()
	h := m.ObserveHTTP("POST /vouchers/{code}/reservations", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusConflict)
	}))
	r := httptest.NewRequest(http.MethodPost, "/vouchers/flash-1/reservations", nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h.ServeHTTP(w, r)
		}
	})
}

func BenchmarkReserveDone(b *testing.B) {
	m := New()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ReserveDone(voucher.PathGateSync, voucher.OutOfStock, time.Millisecond)
		}
	})
}
