package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// TestRebuild_AbandonedHalfWayLiftsItsPauseInSeconds: an operator's
// rebuildGate whose request ends before the rebuild is done (its client gone,
// or its process killed: explorer seed 50) paused the gate for the gate's
// ten-minute bound, so the sale, and in kafka mode the expiry of its
// reservations, stopped for ten minutes. The pause now lasts only while the
// rebuild renews it: the voucher sells again within seconds. Kafka mode
// only: its rebuild waits the publish timeout, paused, before its marker,
// so a request abandoned after 300 ms always leaves it half-way; a sync
// rebuild (pause, snapshot, replace) is often done by then, and the case
// could not be told from a finished one (its pause is renewed the same
// way, syncFlash.rebuild).
func TestRebuild_AbandonedHalfWayLiftsItsPauseInSeconds(t *testing.T) {
	t.Parallel()
	for name, s := range map[string]*server{"kafka": kafkaServer(t, nil)} {
		t.Run(name, func(t *testing.T) {
			api := restAPI{s}
			code := createVoucher(t, s, flash(voucherSpec{TotalLimit: 10}))
			if r := api.reserve(t, code, 1, uniqueOrder(), 100); r.Error != "" {
				t.Fatalf("reserve before the rebuild: %s", r.Error)
			}
			// The rebuild must be caught paused: on a busy machine the
			// request was once abandoned before the server had paused the
			// gate (the reserve after it sold), so a try that finds the gate
			// selling is made again, its sale counted.
			sold := 1
			for try := 1; ; try++ {
				abandonRebuild(t, s, code)
				r := api.reserve(t, code, int64(100+try), uniqueOrder(), 100)
				if r.Error == "UNAVAILABLE" {
					break
				}
				if r.Error != "" || try == 5 {
					t.Fatalf("reserve after abandoned rebuild %d: %q, want UNAVAILABLE (paused)", try, r.Error)
				}
				sold++
			}
			began := time.Now()
			testenv.Eventually(t, "a reserve sold after the abandoned rebuild", func() (bool, string) {
				r := api.reserve(t, code, 3, uniqueOrder(), 100)
				return r.Error == "", r.Error
			})
			t.Logf("sold again %s after the rebuild was abandoned", time.Since(began).Round(100*time.Millisecond))
			waitGate(t, s, code, 10-sold-1)
		})
	}
}

// abandonRebuild sends rebuildGate and hangs up before its answer (the
// rebuild waits seconds, paused, before it reloads), as a killed operator's
// script or process would.
func abandonRebuild(t *testing.T, s *server, code string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"query":     `mutation($c: String!) { rebuildGate(code: $c) { error { code } } }`,
		"variables": map[string]any{"c": code},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("rebuildGate answered %d within 300 ms; the test needs one still paused in its wait", resp.StatusCode)
	}
}
