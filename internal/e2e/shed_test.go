package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Load shedding (server/shed.go) under a forced limit of 2 storefront
// requests at once, which never adapts (a target of an hour): what is over
// the limit is answered 503 UNAVAILABLE with Retry-After and changes
// nothing; nothing under it is refused; no request that was served is
// answered 503. Requests are held in service by sending their headers and
// only half their body: the shedding admits a request before its body is
// read, so it holds its place until the body comes. No timing is asserted.
var shedSettings = map[string]string{"SHED_MAX_INFLIGHT": "2", "SHED_TARGET_LATENCY": "1h", "SHED_MAX_WAIT": "200ms"}

func TestShed_OverAForcedLimitTheExcessIs503AndChangesNothing(t *testing.T) {
	s := startServer(t, shedSettings)
	code := createVoucher(t, s, voucherSpec{TotalLimit: 1000, PerUserLimit: 1000, Flash: true})
	api := []checkoutAPI{restAPI{s}, graphqlAPI{s}}

	// Under the limit: two clients, one request each at a time, never a 503.
	var wg sync.WaitGroup
	for c := range 2 {
		wg.Go(func() {
			for i := range 20 {
				r := api[(c+i)%2].reserve(t, code, 7, uniqueOrder(), 5000)
				if r.Error != "" {
					t.Errorf("under the limit, a reserve over %s was refused: %s (HTTP %d)", api[(c+i)%2].name(), r.Error, r.HTTPStatus)
				}
			}
		})
	}
	wg.Wait()
	if got := shedCount(t, s); got != 0 {
		t.Fatalf("%d requests shed under the limit", got)
	}

	// Over it: both places held, every other storefront request is refused.
	held := []*heldReserve{holdReserve(t, s, code), holdReserve(t, s, code)}
	waitMetric(t, s, "voucher_shed_in_flight", 2)
	var shedOrders []string
	var mu sync.Mutex
	for i := range 20 {
		order := uniqueOrder()
		shedOrders = append(shedOrders, order)
		wg.Go(func() {
			var r response
			if i%2 == 0 {
				r = do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", storefrontToken,
					map[string]any{"customerId": 7, "orderId": order, "orderAmount": 5000})
			} else {
				r = gql(t, s, storefrontToken, `mutation($c: String!, $o: String!) { reserveVoucher(code: $c, customerId: "7", orderId: $o, orderAmount: 5000) { error { code } } }`,
					map[string]any{"c": code, "o": order})
				var got string
				if errs, ok := r.Body["errors"].([]any); ok && len(errs) > 0 {
					got = str(path(errs[0], "extensions", "code"))
				}
				if r.Status == http.StatusServiceUnavailable && got != "UNAVAILABLE" {
					t.Errorf("a shed GraphQL request's errors[0].extensions.code = %q: %s", got, r.Raw)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if r.Status != http.StatusServiceUnavailable || r.Header("Retry-After") != "1" || str(r.Body["error"]) != "UNAVAILABLE" {
				t.Errorf("over the limit: HTTP %d, Retry-After %q, body %s; want 503, 1, error UNAVAILABLE", r.Status, r.Header("Retry-After"), r.Raw)
			}
		})
	}
	wg.Wait()
	// Neither the admin's calls nor health and metrics are ever shed.
	if st := readVoucher(t, s, code); st.Used != 40 {
		t.Errorf("usedCount %d while the places are held, want the 40 served before", st.Used)
	}
	if r := do(t, http.MethodGet, s.URL+"/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("GET /readyz while the places are held: HTTP %d", r.Status)
	}
	if got := shedCount(t, s); got != 20 {
		t.Errorf("voucher_http_shed_total adds up to %d, want the 20 refused", got)
	}

	// The held requests were admitted: they are served, never refused.
	for _, h := range held {
		if status, body := h.finish(t); status != http.StatusCreated {
			t.Errorf("a request admitted before the overload answered %d: %s", status, body)
		}
	}
	// A refused reserve took nothing: its orderId is free, and taken now.
	if st := readVoucher(t, s, code); st.Used != 42 {
		t.Errorf("usedCount %d after the overload, want 42: the refused reserves took nothing", st.Used)
	}
	for _, order := range shedOrders {
		var n int
		if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM voucher_redemption WHERE order_id = $1`, order).Scan(&n); err != nil || n != 0 {
			t.Fatalf("a refused reserve's order %s is in the database (%d, %v)", order, n, err)
		}
		if r := (restAPI{s}).reserve(t, code, 7, order, 5000); r.Error != "" || r.HTTPStatus != http.StatusCreated {
			t.Errorf("the refused order %s reserved again: %s (HTTP %d), want 201", order, r.Error, r.HTTPStatus)
		}
	}
}

// With more clients than places, some requests are refused and some are
// served, each exactly one of the two: the orders in the database are the
// ones answered 201, no more.
func TestShed_ARequestServedIsNeverAnswered503(t *testing.T) {
	s := startServer(t, map[string]string{"SHED_MAX_INFLIGHT": "2", "SHED_TARGET_LATENCY": "1h", "SHED_MAX_WAIT": "0"})
	code := createVoucher(t, s, voucherSpec{TotalLimit: 100000, PerUserLimit: 100000, Flash: true})
	var mu sync.Mutex
	answered := map[string]int{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 25 {
				order := uniqueOrder()
				r := do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", storefrontToken,
					map[string]any{"customerId": rand.Int64N(1000) + 1, "orderId": order, "orderAmount": 5000})
				mu.Lock()
				answered[order] = r.Status
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	served, shed := map[string]bool{}, 0
	for order, status := range answered {
		switch status {
		case http.StatusCreated:
			served[order] = true
		case http.StatusServiceUnavailable:
			shed++
		default:
			t.Errorf("order %s answered %d, want 201 or 503", order, status)
		}
	}
	if shed != shedCount(t, s) {
		t.Errorf("%d answered 503, voucher_http_shed_total says %d", shed, shedCount(t, s))
	}
	rows, err := s.db.Query(t.Context(), `SELECT order_id FROM voucher_redemption WHERE voucher_code = $1`, code)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := 0
	for rows.Next() {
		var order string
		if err := rows.Scan(&order); err != nil {
			t.Fatal(err)
		}
		stored++
		if !served[order] {
			t.Errorf("order %s is reserved but was answered %d", order, answered[order])
		}
	}
	if stored != len(served) {
		t.Errorf("%d orders stored, %d answered 201", stored, len(served))
	}
	t.Logf("%d served, %d shed of %d", len(served), shed, len(answered))
}

// heldReserve is a REST reserve whose body is half sent.
type heldReserve struct {
	conn net.Conn
	rest string
}

func holdReserve(t *testing.T, s *server, code string) *heldReserve {
	t.Helper()
	u, _ := url.Parse(s.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	body, _ := json.Marshal(map[string]any{"customerId": 8, "orderId": uniqueOrder(), "orderAmount": 5000})
	half := len(body) / 2
	head := fmt.Sprintf("POST /vouchers/%s/reservations HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		url.PathEscape(code), u.Host, storefrontToken, len(body))
	if _, err := io.WriteString(conn, head+string(body[:half])); err != nil {
		t.Fatal(err)
	}
	return &heldReserve{conn: conn, rest: string(body[half:])}
}

func (h *heldReserve) finish(t *testing.T) (int, string) {
	t.Helper()
	_ = h.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(h.conn, h.rest); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(h.conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var shedLine = regexp.MustCompile(`(?m)^voucher_http_shed_total\{.*\} (\d+)$`)

// shedCount is voucher_http_shed_total summed over its routes.
func shedCount(t *testing.T, s *server) int {
	t.Helper()
	total := 0
	for _, m := range shedLine.FindAllStringSubmatch(metricsText(t, s), -1) {
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	return total
}

func metricsText(t *testing.T, s *server) string {
	t.Helper()
	resp, err := httpClient.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitMetric waits until an unlabelled gauge reads want.
func waitMetric(t *testing.T, s *server, name string, want int) {
	t.Helper()
	line := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := line.FindStringSubmatch(metricsText(t, s))
		if m != nil && strings.TrimSpace(m[1]) == strconv.Itoa(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never read %d (last %v)", name, want, m)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
