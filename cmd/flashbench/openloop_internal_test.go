package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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
