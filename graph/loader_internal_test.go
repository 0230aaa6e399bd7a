package graph

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"voucherd/internal/postgres"
	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
)

// queryCounter counts the statements a pool sends, and those of them that
// read a campaign (sqlc's CampaignGet).
type queryCounter struct{ n, campaigns atomic.Int64 }

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, q pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	if strings.HasPrefix(q.SQL, "-- name: CampaignGet ") {
		c.campaigns.Add(1)
	}
	return ctx
}
func (*queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestVoucherCampaign_ReadsNoVoucherAgainAndEachCampaignOnce: a voucher's
// campaign comes from the voucher already read, and each campaign is read
// once per operation: a page of 200 vouchers selecting their campaign is
// one query (it read each voucher again: 40 such pages in one request made
// about 8,000 queries, which the complexity limit now also refuses,
// TestComplexity_CountsPagesAndWrites), and two codes of one campaign are
// their two look-ups and one read of the campaign.
func TestVoucherCampaign_ReadsNoVoucherAgainAndEachCampaignOnce(t *testing.T) {
	ctx := context.Background()
	url := testenv.DatabaseURL()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	counter := &queryCounter{}
	cfg.ConnConfig.Tracer = counter
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	testTwin(t) // migrated
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := voucher.NewService(voucher.Deps{Store: postgres.New(pool)}, voucher.Config{Logger: logger})
	admin := voucher.WithCaller(ctx, voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	c, err := svc.CreateCampaign(admin, voucher.NewCampaign{
		Name: "loader " + run(), CodeCount: 2, CodeLength: 12, UsesPerCode: 1, PerUserLimit: 1,
		Terms: voucher.NewVoucher{DiscountAmount: 100, StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The codes, as the background generation makes them.
	testenv.Generated(t, func() error { return svc.GenerateCampaign(ctx, c.ID, "loader-test") }, func() (bool, error) {
		got, err := svc.Campaign(admin, c.ID)
		return got.Status == voucher.CampaignReady, err
	})
	var codes []string
	if err := svc.CampaignCodes(admin, c.ID, func(cc voucher.CampaignCode) error { codes = append(codes, cc.Code); return nil }); err != nil || len(codes) != 2 {
		t.Fatalf("codes %v (%v)", codes, err)
	}
	h := NewHandler(svc, Options{Logger: logger})
	queries := func(doc string) (all, campaigns int64, out string) {
		n, nc := counter.n.Load(), counter.campaigns.Load()
		a := send(h, voucher.RoleAdmin, body(doc, "", nil))
		if strings.Contains(string(a.body), `"errors"`) {
			t.Fatalf("%s: %s", doc, a.body)
		}
		return counter.n.Load() - n, counter.campaigns.Load() - nc, string(a.body)
	}
	if n, _, out := queries(`{ vouchers(first: 200) { edges { node { code campaign { id } } } } }`); n != 1 {
		t.Errorf("a page of vouchers with their campaign: %d queries, want 1 (%.200s)", n, out)
	}
	_, n, out := queries(fmt.Sprintf(`{ a: voucher(code: %q) { campaign { id } } b: voucher(code: %q) { campaign { id } } }`, codes[0], codes[1]))
	if want := fmt.Sprintf(`{"data":{"a":{"campaign":{"id":"%d"}},"b":{"campaign":{"id":"%d"}}}}`, c.ID, c.ID); out != want {
		t.Errorf("two codes' campaign: %s, want %s", out, want)
	}
	if n != 1 {
		t.Errorf("two codes of one campaign: their campaign read %d times, want once", n)
	}
}

// TestComplexity_KeepsNoDocumentAlive: documents too long for the query
// cache (8 KiB) are dropped once answered; the complexity limit kept each
// one's parsed operation, and with it its text, up to 2,000 of them.
func TestComplexity_KeepsNoDocumentAlive(t *testing.T) {
	tw := testTwin(t)
	const docs, size = 100, 200 << 10 // 20 MiB of text
	long := strings.Repeat("x", size)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// A first request so that the handler's own caches are made.
	send(tw.general, voucher.RoleStorefront, body(`{ voucher(code: "`+long+`") { code } }`, "", nil))
	before := heap()
	for i := range docs {
		a := send(tw.general, voucher.RoleStorefront, body(fmt.Sprintf(`{ voucher(code: "%s%d") { code } }`, long, i), "", nil))
		if !strings.Contains(string(a.body), "INVALID_INPUT") {
			t.Fatalf("answer %d: %.300s", i, a.body)
		}
	}
	if after := heap(); after > before+4<<20 {
		t.Errorf("the heap grew by %d MiB after %d documents of %d KiB were answered, want under 4", (after-before)>>20, docs, size>>10)
	}
}
