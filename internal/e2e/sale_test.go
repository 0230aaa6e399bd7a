package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// saleReport is voucher.sale as the admin API answers it.
type saleReport struct {
	FirstUseAt, SoldOutAt *time.Time
	Requests, Admitted    int64
	Refusals              map[string]int64
	Series                []saleSecond
}

type saleSecond struct {
	At                time.Time
	Admitted, Refused int64
}

const saleQuery = `query($c: String!) { voucher(code: $c) { sale {
	firstUseAt soldOutAt requests admitted refusals { code count } series { at admitted refused } } } }`

func readSale(t testing.TB, s *server, code string) saleReport {
	t.Helper()
	r := gql(t, s, adminToken, saleQuery, map[string]any{"c": code})
	v, ok := path(r.Body, "data", "voucher", "sale").(map[string]any)
	if !ok {
		t.Fatalf("voucher %s's sale: %s", code, r.Raw)
	}
	at := func(x any) *time.Time {
		if x == nil {
			return nil
		}
		tm, err := time.Parse(time.RFC3339Nano, str(x))
		if err != nil {
			t.Fatalf("time %v: %v", x, err)
		}
		return &tm
	}
	rep := saleReport{
		FirstUseAt: at(v["firstUseAt"]), SoldOutAt: at(v["soldOutAt"]),
		Requests: num(t, v["requests"]), Admitted: num(t, v["admitted"]),
		Refusals: map[string]int64{},
	}
	for _, c := range v["refusals"].([]any) {
		c := c.(map[string]any)
		rep.Refusals[str(c["code"])] = num(t, c["count"])
	}
	for _, e := range v["series"].([]any) {
		e := e.(map[string]any)
		rep.Series = append(rep.Series, saleSecond{At: *at(e["at"]), Admitted: num(t, e["admitted"]), Refused: num(t, e["refused"])})
	}
	return rep
}

// waitSale waits until the sale shows requests answers and admitted uses
// (each server adds its counts once a second; the kafka path's consumer
// writes its reservations a moment after the answers).
func waitSale(t testing.TB, s *server, code string, requests, admitted int64) saleReport {
	t.Helper()
	var rep saleReport
	testenv.Eventually(t, fmt.Sprintf("the sale of %s to show %d requests and %d admitted", code, requests, admitted), func() (bool, string) {
		rep = readSale(t, s, code)
		return rep.Requests == requests && rep.Admitted == admitted, fmt.Sprintf("%+v", rep)
	})
	return rep
}

// checkSale checks a finished sale of 50 uses against the answers the
// clients got and the database: admitted 50, the refusals by code as
// answered, the series adding up to them, the first use and the sell-out
// moment set, ordered, and the sell-out the latest live reservation's.
func checkSale(t *testing.T, s *server, code string, answers map[string]int) saleReport {
	t.Helper()
	if answers[""] != 50 {
		t.Fatalf("answers %v, want 50 successes", answers)
	}
	rep := waitSale(t, s, code, 300, 50)
	refused := int64(0)
	for c, n := range answers {
		if c == "" {
			continue
		}
		refused += int64(n)
		if rep.Refusals[c] != int64(n) {
			t.Errorf("refusals %s = %d, want %d as answered (all: %v)", c, rep.Refusals[c], n, rep.Refusals)
		}
	}
	if len(rep.Refusals) != len(answers)-1 || refused != 250 {
		t.Errorf("refusals %v, want %v (250 in all)", rep.Refusals, answers)
	}
	var sumAdmitted, sumRefused int64
	for i, e := range rep.Series {
		sumAdmitted += e.Admitted
		sumRefused += e.Refused
		if i > 0 && e.At.Sub(rep.Series[i-1].At) != time.Second {
			t.Errorf("series[%d] at %v after %v: not a second apart", i, e.At, rep.Series[i-1].At)
		}
	}
	if sumAdmitted != 50 || sumRefused != 250 || len(rep.Series) == 0 || len(rep.Series) > 3600 {
		t.Errorf("series sums admitted %d refused %d over %d entries, want 50 and 250", sumAdmitted, sumRefused, len(rep.Series))
	}
	if rep.FirstUseAt == nil || rep.SoldOutAt == nil || rep.SoldOutAt.Before(*rep.FirstUseAt) {
		t.Fatalf("firstUseAt %v soldOutAt %v: want both, in order", rep.FirstUseAt, rep.SoldOutAt)
	}
	var first, last time.Time
	if err := s.db.QueryRow(context.Background(),
		`SELECT min(created_at), max(created_at) FILTER (WHERE status IN ('RESERVED', 'CONFIRMED')) FROM voucher_redemption WHERE voucher_code = $1`,
		code).Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	if !rep.FirstUseAt.Equal(first) || !rep.SoldOutAt.Equal(last) {
		t.Errorf("firstUseAt %v soldOutAt %v, want the first reservation's %v and the last's %v", rep.FirstUseAt, rep.SoldOutAt, first, last)
	}
	if st := rep.Series[0].At; st.After(first.Truncate(time.Second)) {
		t.Errorf("series starts at %v, after the first use's second (%v)", st, first)
	}
	return rep
}

// saleOverTwo sends 300 reserves of distinct customers, 300 at once, half
// to each server, on a voucher of 50 uses.
func saleOverTwo(t *testing.T, a, b *server, code string) map[string]int {
	t.Helper()
	return stampede(300, func(i int) string {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		return restAPI{srv}.reserve(t, code, int64(30_000+i), uniqueOrder(), 100).Error
	})
}

// TestSale_FlashSaleOverTwoServersIsReportedAsItHappened: 300 reserves at
// once over two servers of the sync flash path on 50 uses are reported as
// 300 requests, 50 admitted, 250 refused by their codes, a series adding up;
// the sold-out memory's answers after it are counted too; a release makes
// soldOutAt null again, and admitted stays 50 (it was admitted).
func TestSale_FlashSaleOverTwoServersIsReportedAsItHappened(t *testing.T) {
	a, b := startServer(t, nil), startServer(t, nil)
	code := createVoucher(t, a, voucherSpec{TotalLimit: 50, Flash: true})
	answers := saleOverTwo(t, a, b, code)
	checkSale(t, b, code, answers)

	// A storefront may not read it.
	r := gql(t, a, storefrontToken, saleQuery, map[string]any{"c": code})
	if path(r.Body, "data", "voucher", "sale") != nil || !containsWord(r.Raw, "FORBIDDEN") {
		t.Errorf("a storefront token read the sale: %s", r.Raw)
	}

	// Sold out, a server answers from its memory without the gate: those
	// answers are requests refused too.
	const memory = `voucher_reserve_total{outcome="OUT_OF_STOCK",path="gate-memory"}`
	before := metricValue(t, a, memory)
	for i := range 20 {
		if r := (restAPI{a}).reserve(t, code, int64(31_000+i), uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
			t.Fatalf("a reserve on the sold-out voucher: %q", r.Error)
		}
	}
	if n := metricValue(t, a, memory) - before; n == 0 {
		t.Fatalf("no answer from the sold-out memory (%v)", n)
	}
	if rep := waitSale(t, a, code, 320, 50); rep.Refusals["OUT_OF_STOCK"] != int64(answers["OUT_OF_STOCK"]+20) {
		t.Errorf("refusals after 20 answered from memory: %v", rep.Refusals)
	}

	// Give one use back: uses remain, so it has not sold out.
	var order string
	if err := a.db.QueryRow(context.Background(),
		`SELECT order_id FROM voucher_redemption WHERE voucher_code = $1 ORDER BY created_at DESC LIMIT 1`, code).Scan(&order); err != nil {
		t.Fatal(err)
	}
	if res := (restAPI{a}).release(t, code, order); res.Error != "" {
		t.Fatalf("release: %s", res.Error)
	}
	rep := readSale(t, a, code)
	if rep.SoldOutAt != nil || rep.Admitted != 50 || rep.FirstUseAt == nil {
		t.Errorf("after a release: soldOutAt %v admitted %d firstUseAt %v, want null, 50 and set", rep.SoldOutAt, rep.Admitted, rep.FirstUseAt)
	}
	// Taken again (on the server that gave it back, whose sold-out memory
	// forgot the voucher then; the other's hears of it a moment later):
	// sold out again, at that reserve.
	if res := (restAPI{a}).reserve(t, code, 99_999, uniqueOrder(), 100); res.Error != "" {
		t.Fatalf("reserve after the release: %s", res.Error)
	}
	rep = waitSale(t, a, code, 321, 51)
	if rep.SoldOutAt == nil || !rep.SoldOutAt.After(*rep.FirstUseAt) {
		t.Errorf("sold out again: soldOutAt %v", rep.SoldOutAt)
	}
}

// TestSale_DatabasePathOverTwoServers is the same sale on an ordinary
// voucher, decided by the database alone.
func TestSale_DatabasePathOverTwoServers(t *testing.T) {
	a, b := startServer(t, nil), startServer(t, nil)
	code := createVoucher(t, a, voucherSpec{TotalLimit: 50})
	checkSale(t, a, code, saleOverTwo(t, a, b, code))
}

// TestSale_KafkaPathOverTwoServers is the same sale on the kafka write
// path: the uses admitted are counted from the reservations its consumer
// writes.
func TestSale_KafkaPathOverTwoServers(t *testing.T) {
	_, brokers := testBroker(t)
	a := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	b := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	code := createVoucher(t, a, voucherSpec{TotalLimit: 50, Flash: true})
	checkSale(t, b, code, saleOverTwo(t, a, b, code))
}

// TestSale_CountsSurviveARestart: a server that would not add its counts
// for an hour adds them when it stops, and a server started in its place
// counts on from there.
func TestSale_CountsSurviveARestart(t *testing.T) {
	env := map[string]string{"SALE_FLUSH_INTERVAL": "1h"}
	var running []*server
	t.Cleanup(func() {
		for _, s := range running {
			s.stop()
		}
	})
	a := launch(t, env)
	running = append(running, a)
	code := createVoucher(t, a, voucherSpec{TotalLimit: 5, Flash: true})
	answers := stampede(20, func(i int) string {
		return restAPI{a}.reserve(t, code, int64(40_000+i), uniqueOrder(), 100).Error
	})
	if answers[""] != 5 || answers["OUT_OF_STOCK"] != 15 {
		t.Fatalf("20 reserves on 5 uses: %v", answers)
	}
	// Not added yet: the admitted uses are read from the reservations.
	if rep := readSale(t, a, code); rep.Requests != 5 || rep.Admitted != 5 || len(rep.Refusals) != 0 {
		t.Fatalf("before the stop: %+v, want only the 5 admitted", rep)
	}
	running = nil
	a.stop()
	b := launch(t, env)
	running = append(running, b)
	rep := readSale(t, b, code)
	if rep.Requests != 20 || rep.Refusals["OUT_OF_STOCK"] != 15 {
		t.Fatalf("after a stop: %+v, want 20 requests, 15 OUT_OF_STOCK", rep)
	}
	if r := (restAPI{b}).reserve(t, code, 40_100, uniqueOrder(), 100); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("reserve on the new server: %q", r.Error)
	}
	running = nil
	b.stop()
	c := sharedServer(t)
	if rep := readSale(t, c, code); rep.Requests != 21 || rep.Refusals["OUT_OF_STOCK"] != 16 {
		t.Errorf("after the second server's stop: %+v, want 21 requests", rep)
	}
}
