package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The sale with a webhook endpoint of every event (issue 25: "the sale rows
// with an endpoint registered stay within 5 % of the rows without one"): a
// receiver in this process on loopback answers 204 to every delivery and
// counts the reservation.reserved events of the row's voucher, so the row
// also checks that each winner's event was delivered.

// receiver is the row's webhook endpoint.
type receiver struct {
	srv      *http.Server
	url      string
	mu       sync.Mutex
	reserved map[string]bool // orderIds of reservation.reserved events of code
	code     string
}

func startReceiver(code string) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := &receiver{url: "http://" + ln.Addr().String() + "/hook", reserved: map[string]bool{}, code: code}
	rc.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var ev struct {
			Type        string `json:"type"`
			VoucherCode string `json:"voucherCode"`
			Data        struct {
				OrderID string `json:"orderId"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &ev) == nil && ev.Type == "reservation.reserved" && strings.EqualFold(ev.VoucherCode, rc.code) {
			rc.mu.Lock()
			rc.reserved[ev.Data.OrderID] = true
			rc.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

func (rc *receiver) reservedCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reserved)
}

func (rc *receiver) close() { _ = rc.srv.Close() }

// createWebhook registers url for every event type and returns its id.
func (a *api) createWebhook(ctx context.Context, url string) (string, error) {
	var out struct {
		CreateWebhookEndpoint struct {
			Endpoint *struct{ ID string }
			Error    *struct{ Code, Message string }
		}
	}
	err := a.graphql(ctx, a.admin, `mutation($in: CreateWebhookEndpointInput!) {
  createWebhookEndpoint(input: $in) { endpoint { id } error { code message } } }`,
		map[string]any{"in": map[string]any{"url": url, "events": []string{"*"}, "description": "flashbench"}}, &out)
	if err != nil {
		return "", fmt.Errorf("create webhook endpoint: %w", err)
	}
	if e := out.CreateWebhookEndpoint.Error; e != nil || out.CreateWebhookEndpoint.Endpoint == nil {
		return "", fmt.Errorf("create webhook endpoint: %+v", e)
	}
	return out.CreateWebhookEndpoint.Endpoint.ID, nil
}

// deleteWebhook removes an endpoint; its pending deliveries go with it.
func (a *api) deleteWebhook(ctx context.Context, id string) error {
	var out struct {
		DeleteWebhookEndpoint struct {
			Error *struct{ Code, Message string }
		}
	}
	if err := a.graphql(ctx, a.admin, `mutation($id: ID!) { deleteWebhookEndpoint(id: $id) { error { code message } } }`,
		map[string]any{"id": id}, &out); err != nil {
		return err
	}
	if e := out.DeleteWebhookEndpoint.Error; e != nil {
		return fmt.Errorf("delete webhook endpoint: %s: %s", e.Code, e.Message)
	}
	return nil
}

// withWebhook registers a receiver of every event for the row's load and
// returns what to call after it: wait (bounded) until each winner's
// reservation.reserved was delivered, check it, and remove the endpoint.
func (b *bench) withWebhook(ctx context.Context, p *prepared) (after func(res *scenarioResult, sold int64), err error) {
	rc, err := startReceiver(p.code)
	if err != nil {
		return nil, err
	}
	id, err := p.api.createWebhook(ctx, rc.url)
	if err != nil {
		rc.close()
		return nil, err
	}
	return func(res *scenarioResult, sold int64) {
		start := time.Now()
		for int64(rc.reservedCount()) < sold && time.Since(start) < time.Minute && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		got := rc.reservedCount()
		res.check("webhook: every winner's reservation.reserved delivered", int64(got) == sold,
			fmt.Sprintf("%d of %d within %s of the load's end", got, sold, time.Since(start).Round(100*time.Millisecond)))
		if err := p.api.deleteWebhook(context.WithoutCancel(ctx), id); err != nil {
			fmt.Fprintf(b.stderr, "flashbench: %v\n", err)
		}
		rc.close()
	}, nil
}
