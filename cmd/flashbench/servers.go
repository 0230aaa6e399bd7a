package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"voucherd/internal/apiclient"
	"voucherd/internal/events"
)

// The bench's voucherd processes' own tokens (never the development ones).
const (
	benchStorefrontToken = "flashbench-storefront-7f3c9a51d2e8"
	benchAdminToken      = "flashbench-admin-4b8e2d6f1a9c0357"
)

// The ceiling: what this machine's net/http and encoding/json do with the
// same request and a similar answer and no work at all, served as app.Run
// serves (same http.Server settings) and loaded by the same client.

// ceilingReservation mirrors the REST answer's shape and size.
type ceilingReservation struct {
	OrderID        string    `json:"orderId"`
	VoucherCode    string    `json:"voucherCode"`
	CustomerID     int64     `json:"customerId"`
	OrderAmount    int64     `json:"orderAmount"`
	DiscountAmount int64     `json:"discountAmount"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"createdAt"`
	ExpiresAt      time.Time `json:"expiresAt"`
}

type ceilingBody struct {
	CustomerID  json.RawMessage `json:"customerId"`
	OrderID     string          `json:"orderId"`
	OrderAmount int64           `json:"orderAmount"`
}

func ceilingJSONHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /vouchers/{code}/reservations", func(w http.ResponseWriter, r *http.Request) {
		var b ceilingBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, `{"error":"INVALID_INPUT"}`, http.StatusBadRequest)
			return
		}
		cid, _ := strconv.ParseInt(string(b.CustomerID), 10, 64)
		now := time.Now().UTC()
		var buf bytes.Buffer
		_ = json.NewEncoder(&buf).Encode(ceilingReservation{
			OrderID: b.OrderID, VoucherCode: r.PathValue("code"), CustomerID: cid, OrderAmount: b.OrderAmount,
			DiscountAmount: 1000, Status: "RESERVED", CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute),
		})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(buf.Bytes())
	})
	return mux
}

// ceilingPlainHandler reads the body and answers a fixed JSON without
// encoding/json: the price of net/http alone.
func ceilingPlainHandler() http.Handler {
	answer := []byte(`{"orderId":"o","status":"RESERVED"}` + "\n")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /vouchers/{code}/reservations", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(answer)
	})
	return mux
}

// ceilingMain is `flashbench ceiling [-plain]`: the ceiling's handler
// served in its own process, as voucherd serves (app.Run's http.Server
// settings), on a free loopback port it prints on stdout; it stops on
// SIGTERM.
func ceilingMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flashbench ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	plain := fs.Bool("plain", false, "answer a fixed byte string without encoding/json")
	addr := fs.String("addr", "127.0.0.1:0", "loopback address to listen on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := requireLoopbackAddr(*addr); err != nil {
		return err
	}
	h := ceilingJSONHandler()
	if *plain {
		h = ceilingPlainHandler()
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	fmt.Fprintf(stdout, "%shttp://%s\n", ceilingBanner, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// brokerMain is `flashbench broker`: the Kafka-protocol broker voucherd
// runs in process without KAFKA_BROKERS (kfake, through internal/events),
// here in a process of its own, so the kafka-mode server's CPU is its own.
// It prints its address on stdout and stops on SIGTERM.
func brokerMain(ctx context.Context, stdout io.Writer) error {
	b, err := events.StartBroker()
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(stdout, "%s%s\n", brokerBanner, strings.Join(b.Addrs(), ","))
	<-ctx.Done()
	return nil
}

// api is a small client of voucherd for set-up and checks (the load has
// its own, cheaper one): the tests' client (internal/apiclient).
type api struct {
	base, storefront, admin string
	client                  *http.Client
}

func newAPI(base, storefront, admin string) *api {
	return &api{base: base, storefront: storefront, admin: admin, client: &http.Client{Timeout: 30 * time.Second}}
}

// graphql runs one operation and decodes data into out; GraphQL errors fail.
func (a *api) graphql(ctx context.Context, token, query string, vars map[string]any, out any) error {
	return apiclient.New(a.base, token, a.client).GraphQLData(ctx, query, vars, out)
}

// createVoucher creates a voucher open from a minute ago for half an hour:
// long enough for any run, short enough that no warm-up reloads it later.
func (a *api) createVoucher(ctx context.Context, code string, total int, flash bool, terms map[string]any) error {
	now := time.Now().UTC()
	input := map[string]any{
		"code": code, "discountAmount": 1000, "minOrderAmount": 0, "totalLimit": total, "perUserLimit": 1,
		"startsAt": now.Add(-time.Minute).Format(time.RFC3339), "endsAt": now.Add(30 * time.Minute).Format(time.RFC3339), "flash": flash,
	}
	for k, v := range terms {
		if v == nil {
			delete(input, k)
		} else {
			input[k] = v
		}
	}
	var out struct {
		CreateVoucher struct {
			Voucher *struct{ Code string }
			Error   *struct{ Code, Message string }
		}
	}
	err := a.graphql(ctx, a.admin, `mutation Create($input: CreateVoucherInput!) {
  createVoucher(input: $input) { voucher { code } error { code message } } }`, map[string]any{"input": input}, &out)
	if err != nil {
		return fmt.Errorf("create voucher %s: %w", code, err)
	}
	if e := out.CreateVoucher.Error; e != nil {
		return fmt.Errorf("create voucher %s: %s: %s", code, e.Code, e.Message)
	}
	return nil
}

// endVoucher ends a voucher of the run (the admin mutation the dashboard
// uses), so no warm-up loads its gate again once the run is over.
func (a *api) endVoucher(ctx context.Context, code string) error {
	var out struct {
		EndVoucher struct {
			Error *struct{ Code, Message string }
		}
	}
	if err := a.graphql(ctx, a.admin, `mutation End($code: String!) { endVoucher(code: $code) { error { code message } } }`,
		map[string]any{"code": code}, &out); err != nil {
		return err
	}
	if e := out.EndVoucher.Error; e != nil {
		return fmt.Errorf("%s: %s", e.Code, e.Message)
	}
	return nil
}

// voucherCounts is the voucher query's view of a sale.
type voucherCounts struct {
	UsedCount     int  `json:"usedCount"`
	Remaining     int  `json:"remaining"`
	GateRemaining *int `json:"gateRemaining"`
}

func (a *api) voucher(ctx context.Context, code string) (voucherCounts, error) {
	var out struct{ Voucher *voucherCounts }
	err := a.graphql(ctx, a.storefront, `query V($code: String!) { voucher(code: $code) { usedCount remaining gateRemaining } }`,
		map[string]any{"code": code}, &out)
	if err != nil {
		return voucherCounts{}, err
	}
	if out.Voucher == nil {
		return voucherCounts{}, fmt.Errorf("voucher %s not found", code)
	}
	return *out.Voucher, nil
}

// reserve sends one REST reserve and returns its status.
func (a *api) reserve(ctx context.Context, code, orderID string, customer int64) (int, string, error) {
	ans := apiclient.New(a.base, a.storefront, a.client).Reserve(ctx, code,
		map[string]any{"customerId": customer, "orderId": orderID, "orderAmount": orderAmount})
	return ans.Status, ans.Raw, ans.Err
}

func requireLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not a URL", raw)
	}
	return requireLoopbackAddr(u.Host)
}

// requireLoopbackAddr refuses any host but this machine's loopback.
func requireLoopbackAddr(hostport string) error {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return errors.New(hostport + " is not a loopback address; flashbench only loads this machine")
}
