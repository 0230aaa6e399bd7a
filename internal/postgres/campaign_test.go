package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"voucherd/internal/testenv"
	"voucherd/internal/voucher"
)

func newCampaign(t *testing.T, s *Store, count int) voucher.Campaign {
	t.Helper()
	total := count
	c, err := s.CreateCampaign(context.Background(), voucher.NewCampaign{
		Name: "test", CodeCount: count, CodeLength: 10, UsesPerCode: 1, TotalLimit: &total, PerUserLimit: 1,
		Terms: voucher.NewVoucher{DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD",
			StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// generateCodes makes campaign id's codes, or waits for whoever makes them
// (testenv.Generated).
func generateCodes(t *testing.T, s *Store, id int64) {
	t.Helper()
	ctx := context.Background()
	svc := voucher.NewService(voucher.Deps{Store: s}, voucher.Config{})
	testenv.Generated(t, func() error { return svc.GenerateCampaign(ctx, id, "test") }, func() (bool, error) {
		c, err := s.Campaign(ctx, id)
		return c.Status == voucher.CampaignReady, err
	})
}

// holdGeneration takes a campaign's generation lease for the test, so that
// its codes are written only by the test's own calls.
func holdGeneration(t *testing.T, s *Store, id int64) {
	t.Helper()
	ok, err := s.TakeLease(context.Background(), voucher.CampaignGenerationLease(id), "test", time.Minute)
	if err != nil || !ok {
		t.Fatalf("taking campaign %d's generation lease: %v %v", id, ok, err)
	}
}

// A batch whose codes include one a voucher (or another campaign) has
// stores the others only, and the next batch makes up for it: the registry
// of codes decides, not a check before the insert. A database of its own:
// on the shared one, the other packages' servers' generators completed the
// campaigns under it (a CI run failed so), or took a campaign's lease
// between its creation and the test's taking it (a run beside a CPU hog).
func TestAddCampaignCodes_ACodeTakenByAVoucherIsSkippedAndMadeAgain(t *testing.T) {
	ctx := context.Background()
	s := New(ownDatabase(t))
	taken := newFlashVoucher(t, s, 1, 1, 0)
	c := newCampaign(t, s, 3)
	holdGeneration(t, s, c.ID)
	other := newCampaign(t, s, 1)
	holdGeneration(t, s, other.ID)
	lease := voucher.Lease{Name: voucher.CampaignGenerationLease(other.ID), Holder: "test", TTL: time.Minute}
	fixed := func(codes ...string) func(string, int, int) ([]string, error) {
		return func(_ string, _, n int) ([]string, error) {
			if n != len(codes) {
				return nil, fmt.Errorf("asked for %d codes, have %d", n, len(codes))
			}
			return codes, nil
		}
	}
	a, b := unique("A"), unique("B")
	if _, err := s.AddCampaignCodes(ctx, other.ID, lease, 10, fixed(b)); err != nil {
		t.Fatal(err)
	}
	lease.Name = voucher.CampaignGenerationLease(c.ID)
	step, err := s.AddCampaignCodes(ctx, c.ID, lease, 10, fixed(taken, a, b))
	if err != nil {
		t.Fatal(err)
	}
	if step.Asked != 3 || step.Added != 1 || step.GeneratedCount != 1 || step.Status != voucher.CampaignGenerating {
		t.Fatalf("batch with two taken codes: %+v", step)
	}
	step, err = s.AddCampaignCodes(ctx, c.ID, lease, 10, fixed(unique("C"), unique("D")))
	if err != nil {
		t.Fatal(err)
	}
	if step.Added != 2 || step.GeneratedCount != 3 || step.Status != voucher.CampaignReady {
		t.Fatalf("the batch that completes it: %+v", step)
	}
	// Another holder cannot write a batch while the lease is held.
	if _, err := s.AddCampaignCodes(ctx, c.ID, voucher.Lease{Name: lease.Name, Holder: "other", TTL: time.Minute}, 10, fixed()); err != voucher.ErrLeaseHeld {
		t.Fatalf("another holder's batch: %v, want ErrLeaseHeld", err)
	}
	v, err := s.Voucher(ctx, taken)
	if err != nil || v.CampaignID != 0 {
		t.Fatalf("the voucher keeps its code: %+v %v", v, err)
	}
	got, err := s.Voucher(ctx, a)
	if err != nil || got.CampaignID != c.ID || got.TotalLimit != 1 {
		t.Fatalf("the campaign code: %+v %v", got, err)
	}
}

// Generators of two instances (holders) racing on one campaign make exactly
// its count of codes, each once. A database of its own: on the shared one,
// another package's server could take the lease before either of them.
func TestGenerateCampaign_TwoHoldersMakeEachCodeOnce(t *testing.T) {
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	svc := voucher.NewService(voucher.Deps{Store: s}, voucher.Config{})
	c := newCampaign(t, s, 60_000)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if err := svc.GenerateCampaign(ctx, c.ID, fmt.Sprintf("holder-%d", i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// The loser of the lease returned at once; the winner finished.
	got, err := s.Campaign(ctx, c.ID)
	if err != nil || got.Status != voucher.CampaignReady || got.GeneratedCount != 60_000 {
		t.Fatalf("after two generators: %+v %v", got, err)
	}
	var rows, distinct int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT code) FROM voucher_code WHERE campaign_id = $1`, c.ID).Scan(&rows, &distinct); err != nil || rows != 60_000 || distinct != 60_000 {
		t.Fatalf("%d codes, %d distinct (%v)", rows, distinct, err)
	}
}

// A generator stopped by its context leaves a campaign GENERATING with the
// batches it committed, and the next one finishes it.
//
// A database of its own: on the shared one, another test's voucherd scans
// for campaigns GENERATING and could take the released lease before the
// second generator here does.
func TestGenerateCampaign_StoppedByItsContextResumes(t *testing.T) {
	pool := ownDatabase(t)
	s := New(pool)
	svc := voucher.NewService(voucher.Deps{Store: s}, voucher.Config{})
	c := newCampaign(t, s, 200_000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.GenerateCampaign(ctx, c.ID, "first") }()
	for {
		got, err := s.Campaign(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.GeneratedCount > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	half, err := s.Campaign(context.Background(), c.ID)
	if err != nil || half.Status != voucher.CampaignGenerating || half.GeneratedCount == 0 || half.GeneratedCount == 200_000 {
		t.Fatalf("after the stop: %+v %v", half, err)
	}
	// Not reservable while GENERATING.
	var code string
	if err := pool.QueryRow(context.Background(), `SELECT code FROM voucher_code WHERE campaign_id = $1 LIMIT 1`, c.ID).Scan(&code); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Reserve(context.Background(), voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: unique("o"), OrderAmount: 500}, time.Minute, voucher.PathDatabase)
	if voucher.ErrorCodeOf(err) != voucher.NotFound {
		t.Fatalf("reserve of a code of a generating campaign: %v, want NOT_FOUND", err)
	}
	// The stopped generator released its lease: another takes over at once.
	if err := svc.GenerateCampaign(context.Background(), c.ID, "second"); err != nil {
		t.Fatal(err)
	}
	done2, err := s.Campaign(context.Background(), c.ID)
	if err != nil || done2.Status != voucher.CampaignReady || done2.GeneratedCount != 200_000 {
		t.Fatalf("resumed: %+v %v", done2, err)
	}
	if _, _, err := s.Reserve(context.Background(), voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: unique("o"), OrderAmount: 500}, time.Minute, voucher.PathDatabase); err != nil {
		t.Fatalf("reserve once READY: %v", err)
	}
}

// The sweep gives an expired campaign reservation's use back to its code,
// its campaign and its customer, in one batch with other vouchers'.
func TestExpireDue_GivesCampaignCodesTheirUsesBack(t *testing.T) {
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	c := newCampaign(t, s, 5)
	generateCodes(t, s, c.ID)
	var codes []string
	_ = s.CampaignCodes(ctx, c.ID, func(cc voucher.CampaignCode) error { codes = append(codes, cc.Code); return nil })
	plain := newFlashVoucher(t, s, 5, 1, 0)
	for i, code := range append(codes[:3], plain) {
		if _, _, err := s.Reserve(ctx, voucher.ReserveRequest{Code: code, CustomerID: int64(10 + i), OrderID: unique("o"), OrderAmount: 500}, time.Millisecond, voucher.PathDatabase); err != nil {
			t.Fatal(err)
		}
	}
	allDue(t, pool)
	expired, err := s.ExpireDue(ctx, 100)
	if err != nil || len(expired) != 4 {
		t.Fatalf("expired %d (%v)", len(expired), err)
	}
	got, _ := s.Campaign(ctx, c.ID)
	if got.Terms.UsedCount != 0 {
		t.Errorf("campaign used %d after the sweep", got.Terms.UsedCount)
	}
	var used int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(used_count), 0) FROM voucher_code WHERE campaign_id = $1`, c.ID).Scan(&used); err != nil || used != 0 {
		t.Errorf("codes hold %d uses after the sweep (%v)", used, err)
	}
	var held int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(used_count), 0) FROM voucher_customer WHERE voucher_code = $1`, got.Terms.Code).Scan(&held); err != nil || held != 0 {
		t.Errorf("customers hold %d uses after the sweep (%v)", held, err)
	}
	codesOf := map[string]bool{}
	for _, r := range expired {
		codesOf[r.VoucherCode] = true
	}
	for _, code := range append(codes[:3], plain) {
		if !codesOf[code] {
			t.Errorf("expired reservations %v do not name %s", codesOf, code)
		}
	}
}

// generatedFlashCampaign makes a READY flash campaign of count codes, each
// of usesPerCode uses, total uses in all and one a customer, and returns
// it with its codes.
func generatedFlashCampaign(t *testing.T, s *Store, count, usesPerCode, total int) (voucher.Campaign, []string) {
	t.Helper()
	ctx := context.Background()
	c, err := s.CreateCampaign(ctx, voucher.NewCampaign{
		Name: "flash", CodeCount: count, CodeLength: 10, UsesPerCode: usesPerCode, TotalLimit: &total, PerUserLimit: 1,
		Terms: voucher.NewVoucher{DiscountType: voucher.DiscountFixed, DiscountAmount: 100, Currency: "USD", Flash: true,
			StartsAt: time.Now().Add(-time.Hour), EndsAt: time.Now().Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	generateCodes(t, s, c.ID)
	var codes []string
	if err := s.CampaignCodes(ctx, c.ID, func(cc voucher.CampaignCode) error { codes = append(codes, cc.Code); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(codes) != count {
		t.Fatalf("campaign generated %d codes, want %d", len(codes), count)
	}
	return c, codes
}

// A batch naming a campaign code more times than the code has uses left
// writes the first of them, in batch order, with the rest of the batch in
// one transaction; only the ones past the code's uses are refused, each as
// a single reserve would refuse it (the code used up).
func TestReserveAdmittedCode_ABatchKeepsTheUsesACodeHasLeft(t *testing.T) {
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	c, codes := generatedFlashCampaign(t, s, 4, 2, 100)
	gate := voucher.CampaignGateCode(c.ID)
	ttl := 15 * time.Minute
	a, b, cc, d := codes[0], codes[1], codes[2], codes[3]
	// d has one use left.
	if _, _, err := s.ReserveAdmittedCode(ctx, gate, voucher.ReserveRequest{Code: d, CustomerID: 1, OrderID: unique("d-before"), OrderAmount: 500}, ttl, voucher.PathGateSync); err != nil {
		t.Fatal(err)
	}

	named := []string{a, b, a, d, cc, a, d, b}
	wins := []bool{true, true, true, true, true, false, false, true}
	batch := make([]*pendingWinner, len(named))
	for i, code := range named {
		r := voucher.ReserveRequest{Code: code, CustomerID: int64(100 + i), OrderID: unique("batch"), OrderAmount: 500}
		batch[i] = &pendingWinner{ctx: ctx, owner: gate, r: r, ttl: ttl, path: voucher.PathGateSync, done: make(chan winnerOutcome, 1)}
	}
	s.writeBatch(batch, batchSplits)
	for i, p := range batch {
		out := <-p.done
		switch {
		case wins[i] && (out.err != nil || !out.created):
			t.Errorf("reserve %d (code %s, use %d of it in the batch): created %v, %v; want it written", i, p.r.Code, countBefore(named, i)+1, out.created, out.err)
		case !wins[i] && !errors.Is(out.err, voucher.ErrCodeUsedUp):
			t.Errorf("reserve %d (code %s, past its uses left): created %v, %v; want the code used up", i, p.r.Code, out.created, out.err)
		}
	}
	var writers int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM voucher_redemption WHERE voucher_code = $1 AND order_id LIKE 'batch-%'`, gate).Scan(&writers); err != nil {
		t.Fatal(err)
	}
	if writers != 1 {
		t.Errorf("the batch's 6 winners were written by %d transactions, want 1", writers)
	}
	for code, want := range map[string]int{a: 2, b: 2, cc: 1, d: 2} {
		var used int
		if err := pool.QueryRow(ctx, `SELECT used_count FROM voucher_code WHERE code = $1`, code).Scan(&used); err != nil {
			t.Fatal(err)
		}
		if used != want {
			t.Errorf("code %s: used %d, want %d", code, used, want)
		}
	}
}

// countBefore is how many times named[i] appears before i.
func countBefore(named []string, i int) int {
	n := 0
	for _, s := range named[:i] {
		if s == named[i] {
			n++
		}
	}
	return n
}

// The sync path's winners of a flash campaign, of any of its codes, are
// written in shared transactions on the campaign's row, each code's use
// counted too: 200 winners on 100 single-use codes (two customers a code)
// of an 80-use campaign sell exactly 80, no code twice; the codes refused
// as used up say so (voucher.ErrCodeUsedUp).
func TestReserveAdmittedCode_ACampaignsWinnersShareTransactionsWithinEveryLimit(t *testing.T) {
	ctx := context.Background()
	pool := ownDatabase(t)
	s := New(pool)
	c, codes := generatedFlashCampaign(t, s, 100, 1, 80)
	gate := voucher.CampaignGateCode(c.ID)

	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	won := map[string]int{}
	start := make(chan struct{})
	for i := range 200 {
		wg.Go(func() {
			<-start
			r := voucher.ReserveRequest{Code: codes[i%100], CustomerID: int64(1000 + i), OrderID: unique("o"), OrderAmount: 500}
			res, created, err := s.ReserveAdmittedCode(ctx, gate, r, 15*time.Minute, voucher.PathGateSync)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, voucher.ErrCodeUsedUp):
				outcomes["code used up"]++
			case err != nil:
				outcomes[string(voucher.ErrorCodeOf(err))]++
			case !created || res.VoucherCode != r.Code || res.Status != voucher.StatusReserved:
				outcomes["wrong answer"]++
			default:
				outcomes["RESERVED"]++
				won[r.Code]++
			}
		})
	}
	close(start)
	wg.Wait()
	if outcomes["RESERVED"] != 80 || outcomes["code used up"]+outcomes[string(voucher.OutOfStock)] != 120 || outcomes["code used up"] == 0 {
		t.Fatalf("200 winners on 100 codes of an 80-use campaign: %v", outcomes)
	}
	for code, n := range won {
		if n != 1 {
			t.Errorf("code %s sold %d times", code, n)
		}
	}
	got, _ := s.Campaign(ctx, c.ID)
	var used, writers int
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(used_count), 0) FROM voucher_code WHERE campaign_id = $1`, c.ID).Scan(&used); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM voucher_redemption WHERE voucher_code = $1`, gate).Scan(&writers); err != nil {
		t.Fatal(err)
	}
	if got.Terms.UsedCount != 80 || used != 80 {
		t.Fatalf("stored: campaign used %d, codes used %d; want 80 each", got.Terms.UsedCount, used)
	}
	if writers > 40 {
		t.Errorf("80 winners were written by %d transactions; batching should need far fewer", writers)
	}
	t.Logf("80 winners of 80 codes written by %d transactions", writers)

	// A code of another campaign, or of none, named with this gate is not
	// written on it: Reserve answers it (NOT_FOUND for an unknown code).
	if _, _, err := s.ReserveAdmittedCode(ctx, gate, voucher.ReserveRequest{Code: unique("NOPE"), CustomerID: 5, OrderID: unique("o"), OrderAmount: 500}, time.Minute, voucher.PathGateSync); voucher.ErrorCodeOf(err) != voucher.NotFound {
		t.Errorf("an unknown code through the campaign's gate: %v, want NOT_FOUND", err)
	}
}
