package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// With one connection to a server that takes 20 ms a request, 200 requests
// a second for half a second cannot be sent on time: the open loop counts
// each request's latency from when it was due, so the late ones show the
// wait for the connection (a closed loop would report 20 ms for all).
// Only lower bounds are asserted: a slower machine makes them later still.
func TestOpenLoad_LatencyCountsFromTheScheduledTime(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(20 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"status":"RESERVED"}`)
	}))
	defer srv.Close()
	spec := loadSpec{Name: "test", Kind: "http", Client: "raw", Base: srv.URL, Path: "/vouchers/T/reservations", Body: "rest", Classify: "rest",
		OrderPrefix: "t-", Requests: 101, Concurrency: 1, MaxTime: time.Minute, Rate: 200, Duration: 500 * time.Millisecond, Drain: time.Minute,
		CPU: cpuGroups{Harness: []int{os.Getpid()}}}
	if err := spec.validate(); err != nil {
		t.Fatal(err)
	}
	newAttempt, closeAll, err := spec.attempts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	res := openLoad(context.Background(), spec, newAttempt, io.Discard)
	if res.Scheduled != 100 || res.Classes["answered"] != 100 || res.Unsent != 0 || res.All.Count != 100 || len(res.Won) != 100 {
		t.Fatalf("scheduled %d, answered %d, unsent %d, in the histogram %d, won %d; want 100 answered", res.Scheduled, res.Classes["answered"], res.Unsent, res.All.Count, len(res.Won))
	}
	// Request i is due at 5i ms and answered no sooner than 20(i+1) ms.
	if res.All.P50 < 500*time.Millisecond || res.All.Max < time.Second {
		t.Errorf("p50 %v, max %v from the scheduled time; want at least 500ms and 1s (the wait for the one connection counted)", res.All.P50, res.All.Max)
	}
}

// A recovery phase: 30 requests that take 30 ms each, due every 10 ms on
// one connection, leave a backlog of about 0.6 s when the load falls to 20
// a second and the server turns fast. The answers due just after the fall
// wait behind the backlog (their window's p99 over 100 ms); later windows
// are on time, so the p99 is "back" after some window past the first, and
// every window of the phase is reported.
func TestOpenLoad_ARecoveryPhaseSaysWhenTheP99IsBack(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if served.Add(1) <= 30 {
			time.Sleep(30 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"status":"RESERVED"}`)
	}))
	defer srv.Close()
	spec := loadSpec{Name: "test", Kind: "http", Client: "raw", Base: srv.URL, Path: "/vouchers/T/reservations", Body: "rest", Classify: "rest",
		OrderPrefix: "t-", Requests: 200, Concurrency: 1, MaxTime: time.Minute, Rate: 100, Duration: 300 * time.Millisecond, Drain: time.Minute,
		ThenRate: 20, ThenDuration: 3 * time.Second, CPU: cpuGroups{Harness: []int{os.Getpid()}}}
	if err := spec.validate(); err != nil {
		t.Fatal(err)
	}
	newAttempt, closeAll, err := spec.attempts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	res := openLoad(context.Background(), spec, newAttempt, io.Discard)
	if res.Scheduled != 90 || res.Classes["answered"] != 90 {
		t.Fatalf("scheduled %d, answered %d; want 30 + 60", res.Scheduled, res.Classes["answered"])
	}
	if len(res.Recovery) != 12 {
		t.Fatalf("%d recovery windows, want 12 of %s over 3 s", len(res.Recovery), RecoveryWindow)
	}
	if res.Recovery[0].Count == 0 || res.Recovery[0].P99 < recoveryP99 {
		t.Errorf("the first window after the fall: %+v; want its answers late behind the backlog (p99 at least %s)", res.Recovery[0], recoveryP99)
	}
	if res.RecoveredAfter < RecoveryWindow || res.RecoveredAfter >= 3*time.Second {
		t.Errorf("p99 back after %s; want after the first window and within the phase (windows: %+v)", res.RecoveredAfter, res.Recovery)
	}
}

// recovered judges the windows from the last one back.
func TestRecovered_IsTheFirstWindowFromWhichEveryP99IsUnder100ms(t *testing.T) {
	w := func(from int, count int64, p99ms int) recoveryWindow {
		return recoveryWindow{From: time.Duration(from) * RecoveryWindow, Count: count, P99: time.Duration(p99ms) * time.Millisecond}
	}
	for _, tc := range []struct {
		ws   []recoveryWindow
		want time.Duration
	}{
		{[]recoveryWindow{w(0, 5, 10), w(1, 5, 20)}, 0},
		{[]recoveryWindow{w(0, 5, 300), w(1, 5, 120), w(2, 5, 40), w(3, 5, 30)}, 2 * RecoveryWindow},
		{[]recoveryWindow{w(0, 5, 30), w(1, 5, 120), w(2, 5, 40)}, 2 * RecoveryWindow},
		{[]recoveryWindow{w(0, 5, 30), w(1, 5, 40), w(2, 5, 400)}, -1},
		{[]recoveryWindow{w(0, 5, 30), w(1, 0, 0)}, -1}, // nothing answered of the last window's due requests
	} {
		if got := recovered(tc.ws); got != tc.want {
			t.Errorf("recovered(%+v) = %s, want %s", tc.ws, got, tc.want)
		}
	}
}

// Issue 28's targets are judged on the rows: met only when every scenario
// and connection count meets it, each figure named.
func TestOpenLoopTargets_MetOnlyWhenEveryRowMeetsThem(t *testing.T) {
	row := func(scenario string, conns int, factor float64, p99, maxLat time.Duration, answered int64, recovered time.Duration, checks ...string) *openRow {
		r := &openRow{Scenario: scenario, Connections: conns, Factor: factor, Capacity: 1000, Rate: factor * 1000, Checks: checks,
			Result: &openResult{Classes: map[string]int64{"answered": answered}, Elapsed: time.Second,
				All: latencySummary{P99: p99, Max: maxLat}, RecoveredAfter: recovered}}
		if factor > 1 {
			r.ThenRate = 500
			r.Result.Recovery = []recoveryWindow{{}, {}}
		}
		return r
	}
	good := &openLoopReport{Rows: []*openRow{
		row("rest", 256, 0.8, 40*time.Millisecond, 90*time.Millisecond, 800, 0),
		row("rest", 256, 1.5, 300*time.Millisecond, 900*time.Millisecond, 900, 1500*time.Millisecond),
	}}
	got := good.targets()
	for _, want := range []string{"| p99 < 100 ms at 0.8 x | rest 256: 40.0 ms | yes |", "rest 256: 900.0 ms | yes |", "rest 256: 0.90 x | yes |",
		"| exactly the quota sold, never more, every reservation answered held | every row (2) | yes |", "rest 256: 1.5s | yes |"} {
		if !strings.Contains(got, want) {
			t.Errorf("targets of rows that meet them lack %q:\n%s", want, got)
		}
	}
	bad := &openLoopReport{Rows: []*openRow{
		row("rest", 256, 0.8, 40*time.Millisecond, 90*time.Millisecond, 800, 0),
		row("rest", 10000, 0.8, 2500*time.Millisecond, 3*time.Second, 600, 0),
		row("rest", 10000, 1.5, 3*time.Second, 5*time.Second, 700, -1, "sold 999, want 1000"),
	}}
	got = bad.targets()
	for _, want := range []string{"| p99 < 100 ms at 0.8 x | rest 256: 40.0 ms, rest 10,000: 2500.0 ms | **no** |", "rest 10,000: 5000.0 ms | **no** |",
		"rest 10,000: 0.70 x | **no** |", "rest 10,000: 1.5 x: sold 999, want 1000 | **no** |", "rest 10,000: never | **no** |"} {
		if !strings.Contains(got, want) {
			t.Errorf("targets of rows that miss them lack %q:\n%s", want, got)
		}
	}
}
