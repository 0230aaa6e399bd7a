package faults

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/testenv"
	"voucherd/internal/testproc"
)

// An instance SIGKILLed while a delivery is on the wire loses no event:
// the delivery it had taken is due again when its lease ends, and another
// instance delivers it (at least once: the receiver may see it twice).
func TestWebhookFaults_AnInstanceKilledMidDeliveryLosesNoEvent(t *testing.T) {
	t.Parallel()
	dbURL := ownDatabase(t)
	db := openDB(t, dbURL)

	var mu sync.Mutex
	first := make(chan struct{}) // closed when the first request arrived
	var firstOnce sync.Once
	got := map[string]int{} // event id -> requests
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &ev)
		mu.Lock()
		got[ev.ID]++
		n := got[ev.ID]
		mu.Unlock()
		if n == 1 {
			// The first attempt hangs until the instance that sent it is
			// killed (its connection goes) or the test ends.
			firstOnce.Do(func() { close(first) })
			<-r.Context().Done()
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)
	t.Cleanup(rcv.CloseClientConnections)

	env := serveEnv(dbURL, testenv.RedisURL(), map[string]string{"WEBHOOK_TIMEOUT": "3s", "WEBHOOK_FIRST_RETRY": "200ms"})
	a := testproc.Serve(t, env)
	r := graphql(t, a.URL, `mutation($in: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $in) { endpoint { id } error { code } } }`,
		map[string]any{"in": map[string]any{"url": strings.Replace(rcv.URL, "127.0.0.1", "localhost", 1), "events": []string{"voucher.created"}}})
	if dig(r, "data", "createWebhookEndpoint", "endpoint", "id") == nil {
		t.Fatalf("createWebhookEndpoint: %v", r)
	}
	code := createFlashVoucher(t, a.URL, 10, 1)
	select {
	case <-first:
	case <-time.After(60 * time.Second):
		t.Fatal("no delivery attempt within 60 s")
	}
	a.Kill(t) // mid-delivery: the attempt is on the wire, its outcome never recorded

	var status string
	var attempts int
	if err := db.QueryRow(context.Background(), `SELECT d.status, d.attempts FROM webhook_delivery d JOIN webhook_event e ON e.id = d.event_id WHERE e.voucher_code = $1`, code).Scan(&status, &attempts); err != nil {
		t.Fatal(err)
	}
	if status != "PENDING" || attempts != 1 {
		t.Fatalf("after the kill the delivery is %s after %d attempt(s), want PENDING after 1", status, attempts)
	}

	testproc.Serve(t, env) // another instance
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := db.QueryRow(context.Background(), `SELECT d.status, d.attempts FROM webhook_delivery d JOIN webhook_event e ON e.id = d.event_id WHERE e.voucher_code = $1`, code).Scan(&status, &attempts); err != nil {
			t.Fatal(err)
		}
		if status == "DELIVERED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event was not delivered by the other instance within 60 s: %s after %d attempts", status, attempts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || attempts < 2 {
		t.Errorf("the receiver saw %v, the delivery %d attempts; want one event, attempted again after the kill", got, attempts)
	}
}
