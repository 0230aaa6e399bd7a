package graph

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// fuzzCode is the voucher the fuzz target's seeds reserve, confirm and
// release: open until 2100, with uses for many runs.
const fuzzCode = "fuzz-fast"

// The placeholders of a fuzz input: @V is a voucher made fresh for each
// side, @O the prefix of the orderIds each side uses.
const (
	voucherMark = "@V"
	orderMark   = "@O"
)

// FuzzFastPathMatchesExecutor sends a request made of a query text, an
// operationName (left out when empty) and a variables JSON text to the
// handler with its fast path and to the general executor, and fails unless
// both answer with the same status and the same bytes and leave the same
// reservations behind. Each side gets a voucher of its own, made fresh with
// the same terms, and orderIds of its own, written where the input says @V
// and @O: the fast path's side after a first request of the same text on a
// third voucher, so that the fast path has seen the text and may serve it.
// An input without the placeholders is compared on one shared voucher
// (differOn: the first request may change the state, the two compared see
// the same). `go test` replays the seeds in
// testdata/fuzz/FuzzFastPathMatchesExecutor; `make fuzz` explores from them.
func FuzzFastPathMatchesExecutor(f *testing.F) {
	f.Add(reserveDoc, "Reserve", []byte(`{"input":{"code":"fuzz-fast","customerId":"1","orderId":"fz-1","orderAmount":2000}}`))
	f.Add(confirmDoc, "", []byte(`{"input":{"code":"fuzz-fast","orderId":"fz-1"}}`))
	f.Add(releaseDoc, "", []byte(`{"in":{"code":"fuzz-fast","orderId":"fz-1"}}`))
	f.Add(reserveDoc, "Reserve", []byte(`{"input":{"code":"@V","customerId":"1","orderId":"@O-1","orderAmount":2000}}`))
	f.Add(fullReserveDoc, "", []byte(`{"input":{"code":"@V","customerId":"7","orderId":"@O-2","orderAmount":500}}`))
	f.Add(confirmDoc, "Confirm", []byte(`{"input":{"code":"@V","orderId":"@O-1"}}`))
	f.Add(releaseDoc, "", []byte(`{"in":{"code":"@V","orderId":"@O-3"}}`))
	f.Add(`mutation($input: ReserveVoucherInput!) { a: reserveVoucher(input: $input) { reservation { orderId } } }`, "", []byte(`{"input":{"code":"@V","customerId":1,"orderId":"@O-4","orderAmount":2000}}`))
	f.Add(`mutation($input: ReserveVoucherInput!) { reserveVoucher(input: $input) { reservation { orderId } error { code field } } }`, "", []byte(`{"input":{"code":"@V","customerId":"1","orderId":123,"orderAmount":2000}}`))
	// Money past 2^53-1 (and at it): the scalar's refusal, not the domain's.
	f.Add(reserveDoc, "Reserve", []byte(`{"input":{"code":"@V","customerId":"1","orderId":"@O-5","orderAmount":9007199254740992}}`))
	f.Add(reserveDoc, "Reserve", []byte(`{"input":{"code":"@V","customerId":"1","orderId":"@O-6","orderAmount":9007199254740991}}`))
	tw := testTwin(f)
	_, err := tw.svc.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: fuzzCode, DiscountAmount: 500, MinOrderAmount: 1000, TotalLimit: 1_000_000, PerUserLimit: 1_000_000,
		StartsAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), EndsAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil && voucher.ErrorCodeOf(err) != voucher.VoucherExists {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query, operationName string, variables []byte) {
		b := []byte(`{"query":` + jsonString(query))
		if operationName != "" {
			b = append(b, `,"operationName":`+jsonString(operationName)...)
		}
		b = append(append(append(b, `,"variables":`...), variables...), '}')
		if !bytes.Contains(b, []byte(voucherMark)) || !bytes.Contains(b, []byte(orderMark)) {
			tw.differ(t, voucher.RoleStorefront, b)
			return
		}
		tw.differOnOwnVouchers(t, b)
	})
}

// side is one voucher and orderId prefix of differOnOwnVouchers.
type side struct{ code, orders string }

func newSide(t *testing.T, svc *voucher.Service) side {
	t.Helper()
	// Codes are stored in capital letters: the id is too, so that the
	// answers' codes are found again.
	id := fmt.Sprintf("%08X", rand.Uint32())
	s := side{code: "FZ" + id, orders: "ord-" + id}
	_, err := svc.CreateVoucher(context.Background(), voucher.NewVoucher{
		Code: s.code, DiscountAmount: 500, MinOrderAmount: 1000, TotalLimit: 3, PerUserLimit: 2,
		StartsAt: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), EndsAt: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (s side) fill(body []byte) []byte {
	return bytes.ReplaceAll(bytes.ReplaceAll(body, []byte(voucherMark), []byte(s.code)), []byte(orderMark), []byte(s.orders))
}

// general undoes fill in an answer, and writes every time as T: the two
// sides run at different moments.
var rfc3339 = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)

func (s side) general(answer []byte) []byte {
	answer = bytes.ReplaceAll(bytes.ReplaceAll(answer, []byte(s.code), []byte(voucherMark)), []byte(s.orders), []byte(orderMark))
	return rfc3339.ReplaceAll(answer, []byte("T"))
}

// reservations is what a side's voucher holds in the database: its counts
// and each reservation, orderIds written with @O.
func (tw *twin) reservations(t *testing.T, s side) string {
	t.Helper()
	var out bytes.Buffer
	v, err := tw.svc.Voucher(context.Background(), s.code)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "used %d reserved %d confirmed %d budget %d\n", v.UsedCount, v.ReservedCount, v.ConfirmedCount, v.BudgetUsed)
	rows, err := tw.pool.Query(context.Background(), `SELECT order_id, customer_id, order_amount, discount_amount, status FROM voucher_redemption WHERE voucher_code = $1 ORDER BY order_id`, s.code)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var order, status string
		var customer, amount, discount int64
		if err := rows.Scan(&order, &customer, &amount, &discount, &status); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "%s %d %d %d %s\n", bytes.ReplaceAll([]byte(order), []byte(s.orders), []byte(orderMark)), customer, amount, discount, status)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// differOnOwnVouchers sends body to the fast handler on a warm-up voucher,
// then to the fast handler and to the general one each on a fresh voucher
// of its own, and fails unless both answer the same (with their own codes,
// orderIds and times written alike) and leave the same reservations.
func (tw *twin) differOnOwnVouchers(t *testing.T, body []byte) {
	t.Helper()
	warm, fast, general := newSide(t, tw.svc), newSide(t, tw.svc), newSide(t, tw.svc)
	send(tw.fast, voucher.RoleStorefront, warm.fill(body))
	g := send(tw.general, voucher.RoleStorefront, general.fill(body))
	before := tw.fp.served.Load()
	fa := send(tw.fast, voucher.RoleStorefront, fast.fill(body))
	served := tw.fp.served.Load() > before
	if g.status != fa.status || g.ctype != fa.ctype || !bytes.Equal(general.general(g.body), fast.general(fa.body)) {
		t.Fatalf("the fast path (served %v) and the executor answer differently to %s\n fast:    %d %s %s\n general: %d %s %s", served, body, fa.status, fa.ctype, fa.body, g.status, g.ctype, g.body)
	}
	if gs, fs := tw.reservations(t, general), tw.reservations(t, fast); gs != fs {
		t.Fatalf("the fast path (served %v) and the executor leave different reservations after %s\n fast:\n%s general:\n%s", served, body, fs, gs)
	}
}
