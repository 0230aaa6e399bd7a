package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/internal/testenv"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// Flash campaigns: one gate for the whole campaign,
// keys voucher:{~C<id>}:..., deciding each code's uses with the campaign's
// stock and the customer's count in one script. The scenario on
// both transports is in TestCampaign_LimitsHoldTogetherUnderConcurrency.

// codeUsesInDatabase reads each code of a campaign that has uses, and the
// campaign's remaining uses, from the database.
func codeUsesInDatabase(t testing.TB, db *pgxpool.Pool, id string) (map[string]int, int) {
	t.Helper()
	ctx := context.Background()
	rows, err := db.Query(ctx, `SELECT code, used_count FROM voucher_code WHERE campaign_id = $1 AND used_count > 0`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	uses := map[string]int{}
	for rows.Next() {
		var code string
		var n int
		if err := rows.Scan(&code, &n); err != nil {
			t.Fatal(err)
		}
		uses[code] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var remaining int
	if err := db.QueryRow(ctx, `SELECT v.total_limit - v.used_count FROM campaign c JOIN voucher v ON v.code = c.voucher_code WHERE c.id = $1`, id).Scan(&remaining); err != nil {
		t.Fatal(err)
	}
	return uses, remaining
}

// assertGateIsTheDatabase checks a campaign's gate against the database:
// the stock and every code's uses.
func assertGateIsTheDatabase(t testing.TB, redisURL string, db *pgxpool.Pool, id string) {
	t.Helper()
	g := campaignGate(t, redisURL, id)
	uses, remaining := codeUsesInDatabase(t, db, id)
	if g.stock != remaining {
		t.Errorf("gate stock %d, database remaining %d", g.stock, remaining)
	}
	if diff := cmp.Diff(uses, g.codes); diff != "" {
		t.Errorf("code uses, database (-) and gate (+):\n%s", diff)
	}
}

// Two instances sell one flash campaign at once (80 customers on 80 codes,
// 50 uses): exactly 50 win, each code once, and afterwards, with releases,
// the gate holds what the database holds and reconciliation finds no drift.
func TestFlashCampaign_TwoInstancesSellItAndTheGateAgreesWithTheDatabase(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	env := map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1s"}
	s := startServer(t, env)
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 100, UsesPerCode: 1, TotalLimit: 50, PerUserLimit: 1, Flash: true})
	// A second instance, started after the campaign was made: it streams
	// the codes at its warm-up, or looks each up at its first reserve.
	s2 := startServer(t, env)
	apis := []restAPI{{s}, {s2}}

	type win struct{ code, order string }
	var (
		mu       sync.Mutex
		outcomes = map[string]int{}
		wins     []win
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	for i := range 80 {
		wg.Go(func() {
			<-start
			order := uniqueOrder()
			r := apis[i%2].reserve(t, codes[i], int64(i+1), order, 5000)
			mu.Lock()
			defer mu.Unlock()
			outcomes[r.status()+r.Error]++
			if r.status() == "RESERVED" {
				wins = append(wins, win{codes[i], order})
			}
		})
	}
	close(start)
	wg.Wait()
	if outcomes["RESERVED"] != 50 || outcomes["OUT_OF_STOCK"] != 30 {
		t.Fatalf("outcomes %v, want 50 RESERVED and 30 OUT_OF_STOCK", outcomes)
	}
	assertGateIsTheDatabase(t, rs.URL, db, id)

	// Five released, through either instance: the codes and the campaign
	// get their uses back at the gate as in the database.
	for i, w := range wins[:5] {
		if r := apis[i%2].release(t, w.code, w.order); r.status() != "RELEASED" {
			t.Fatalf("release %v: %+v", w, r)
		}
	}
	assertGateIsTheDatabase(t, rs.URL, db, id)
	// A freed code sells again, to a customer who holds none.
	if r := apis[1].reserve(t, wins[0].code, 1000, uniqueOrder(), 5000); r.status() != "RESERVED" {
		t.Fatalf("the freed code re-reserved: %+v", r)
	}
	// A code still held does not, though the campaign has uses.
	if r := apis[0].reserve(t, wins[10].code, 1001, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("a held single-use code: %+v, want OUT_OF_STOCK", r)
	}
	assertGateIsTheDatabase(t, rs.URL, db, id)

	// Reconciliation (every second, by one instance) compares the campaign's gate as a
	// voucher's: a report after the sale, with no drift.
	after := time.Now()
	gateCode := "~C" + id
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := gql(t, s, adminToken, `{ driftReports { voucherCode databaseRemaining gateRemaining drift checkedAt } }`, nil)
		var found map[string]any
		reports, _ := path(r.Body, "data", "driftReports").([]any)
		for _, rep := range reports {
			if m, _ := rep.(map[string]any); str(m["voucherCode"]) == gateCode {
				found = m
			}
		}
		if found != nil {
			checked, err := time.Parse(time.RFC3339Nano, str(found["checkedAt"]))
			if err == nil && checked.After(after) {
				if num(t, found["drift"]) != 0 || found["gateRemaining"] == nil || num(t, found["gateRemaining"]) != num(t, found["databaseRemaining"]) ||
					num(t, found["databaseRemaining"]) != 4 {
					t.Fatalf("the campaign's drift report: %v; want no drift, 4 remaining", found)
				}
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no drift report of %s after the sale: %s", gateCode, r.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A gate lost from Redis is rebuilt from the database with each code's
// uses: a used-up code stays used up, the campaign's stock is the
// database's.
func TestFlashCampaign_AGateReloadedFromTheDatabaseKeepsEachCodesUses(t *testing.T) {
	t.Parallel()
	s, rs, rdb, db := ownRedisServer(t)
	api := restAPI{s}
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 10, UsesPerCode: 2, TotalLimit: 8, PerUserLimit: 1, Flash: true})
	for i := range 2 { // codes[0] used up
		if r := api.reserve(t, codes[0], int64(i+1), uniqueOrder(), 5000); r.status() != "RESERVED" {
			t.Fatalf("reserve %d: %+v", i, r)
		}
	}
	confirmed := uniqueOrder()
	if r := api.reserve(t, codes[1], 3, confirmed, 5000); r.status() != "RESERVED" {
		t.Fatalf("reserve: %+v", r)
	}
	if r := api.confirm(t, codes[1], confirmed); r.status() != "CONFIRMED" {
		t.Fatalf("confirm: %+v", r)
	}
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "voucher:{~C"+id+"}:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the campaign's gate keys: %v, %v", keys, err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	// The next reserve loads the gate from the database.
	if r := api.reserve(t, codes[0], 10, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("a used-up code after the reload: %+v, want OUT_OF_STOCK", r)
	}
	if r := api.reserve(t, codes[1], 11, uniqueOrder(), 5000); r.status() != "RESERVED" {
		t.Fatalf("a code with one of two uses confirmed: %+v", r)
	}
	if r := api.reserve(t, codes[1], 12, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("its third use: %+v, want OUT_OF_STOCK", r)
	}
	assertGateIsTheDatabase(t, rs.URL, db, id)
	if g := campaignGate(t, rs.URL, id); g.codes[codes[0]] != 2 || g.codes[codes[1]] != 2 || g.stock != 4 {
		t.Errorf("the reloaded gate: %+v", g)
	}
}

// The database has the last word after the gate: a code it holds used up
// that the gate thought free is refused OUT_OF_STOCK, and the gate converges
// (the code's use kept there, the campaign's given back), so the next
// request for the code is refused at the gate and the campaign undersells
// nothing.
func TestFlashCampaign_ADatabaseRefusalOfACodeConvergesTheGate(t *testing.T) {
	t.Parallel()
	s, rs, _, db := ownRedisServer(t)
	api := restAPI{s}
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 5, UsesPerCode: 1, TotalLimit: 5, PerUserLimit: 1, Flash: true})
	ctx := context.Background()
	// The database's count of codes[0] is ahead of the gate's (as a use
	// written while the gate was lost and reloaded from an older snapshot).
	if _, err := db.Exec(ctx, `UPDATE voucher_code SET used_count = 1 WHERE code = $1`, codes[0]); err != nil {
		t.Fatal(err)
	}
	if r := api.reserve(t, codes[0], 1, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("a code the database holds used up: %+v, want OUT_OF_STOCK", r)
	}
	g := campaignGate(t, rs.URL, id)
	if g.stock != 5 || g.codes[codes[0]] != 1 {
		t.Fatalf("the gate after the refusal: %+v; want the campaign's 5 uses and codes[0] used up", g)
	}
	// The customer's use came back too: they may take another code.
	if r := api.reserve(t, codes[1], 1, uniqueOrder(), 5000); r.status() != "RESERVED" {
		t.Fatalf("the refused customer on another code: %+v", r)
	}
	var rows int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM voucher_redemption WHERE campaign_code = $1`, codes[0]).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("the refused code has %d reservations (%v)", rows, err)
	}
}

// A code of a campaign that is not READY is NOT_FOUND on the flash path too,
// on an instance that never saw the campaign's codes.
func TestFlashCampaign_ACodeOfACampaignNotReadyIsNotFound(t *testing.T) {
	t.Parallel()
	s, rs, _, db := ownRedisServer(t)
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 3, Flash: true})
	// Not a state a campaign goes back to; it stands for a campaign whose
	// codes exist and that is not READY, seen by a fresh instance.
	if _, err := db.Exec(context.Background(), `UPDATE campaign SET status = 'FAILED', failure = 'test' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	s2 := startServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": db.Config().ConnString()})
	for _, api := range transports(s2) {
		if r := api.reserve(t, codes[0], 1, uniqueOrder(), 5000); r.Error != "NOT_FOUND" {
			t.Errorf("%s: a code of a FAILED flash campaign: %+v, want NOT_FOUND", api.name(), r)
		}
	}
}

// With FLASH_WRITE_PATH=kafka a flash campaign's codes are decided at its
// gate as on the sync path, with the write in the request (admit.lua keeps
// no per-code uses), beside flash vouchers whose writes the broker carries:
// an orderId one holds is ORDER_CONFLICT on the other, both ways; a
// reservation that expires gives its use and its code back to the
// campaign's gate; a use the gate took with no write (the process died in
// between) is returned by reconciliation after two passes. The issue's
// scenario in kafka mode is TestCampaign_LimitsHoldTogetherUnderConcurrency.
func TestFlashCampaign_OnTheKafkaWritePath(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	s := kafkaServer(t, map[string]string{
		"DATABASE_URL": dbURL, "RESERVATION_TTL": "3s", "EXPIRY_INTERVAL": "500ms", "RECONCILE_INTERVAL": "1s",
	})
	api := restAPI{s}
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 5, UsesPerCode: 1, TotalLimit: 3, PerUserLimit: 1, Flash: true})
	held := uniqueOrder()
	if r := api.reserve(t, codes[0], 1, held, 5000); r.status() != "RESERVED" {
		t.Fatalf("reserve of a campaign code: %+v", r)
	}
	if g := campaignGate(t, redisURL, id); g.stock != 2 || g.codes[codes[0]] != 1 {
		t.Errorf("the campaign's gate after one reserve: stock %d, codes %v; want 2 and %s holding 1", g.stock, g.codes, codes[0])
	}

	flashVoucher := createVoucher(t, s, flash(voucherSpec{TotalLimit: 5}))
	if r := api.reserve(t, flashVoucher, 1, held, 100); r.Error != "ORDER_CONFLICT" {
		t.Errorf("a kafka flash voucher with the orderId a campaign code holds: %+v, want ORDER_CONFLICT", r)
	}
	onVoucher := uniqueOrder()
	if r := api.reserve(t, flashVoucher, 2, onVoucher, 100); r.Error != "" {
		t.Fatalf("reserve of the kafka flash voucher: %s", r.Error)
	}
	if r := api.reserve(t, codes[1], 2, onVoucher, 5000); r.Error != "ORDER_CONFLICT" {
		t.Errorf("a campaign code with the orderId a kafka flash voucher holds: %+v, want ORDER_CONFLICT", r)
	}

	status := func(order string) string {
		var st string
		_ = db.QueryRow(context.Background(), `SELECT status FROM voucher_redemption WHERE order_id = $1`, order).Scan(&st)
		return st
	}
	testenv.Eventually(t, "the campaign's reservation expired and its use back at the gate", func() (bool, string) {
		g := campaignGate(t, redisURL, id)
		st := status(held)
		return st == "RELEASED" && g.stock == 3 && g.codes[codes[0]] == 0, fmt.Sprintf("%s, gate stock %d codes %v", st, g.stock, g.codes)
	})
	// The expired code sells again, to the same customer.
	if r := api.reserve(t, codes[0], 1, uniqueOrder(), 5000); r.status() != "RESERVED" {
		t.Errorf("the expired code reserved again: %+v", r)
	}

	rdb, err := gate.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	leaked := uniqueOrder()
	v, err := gate.New(rdb).Reserve(context.Background(), "~C"+id, 1, 0,
		voucher.ReserveRequest{Code: codes[3], CustomerID: 9, OrderID: leaked, OrderAmount: 5000})
	if err != nil || v != voucher.GateAdmitted {
		t.Fatalf("a use taken at the campaign's gate with no write: %v, %v", v, err)
	}
	testenv.Eventually(t, "reconciliation to return the leaked use", func() (bool, string) {
		d, ok := driftOf(t, db, "~C"+id)
		return ok && strings.Contains(d.Repaired, "returned 1 leaked use"), fmt.Sprintf("%+v", d)
	})
	// The gate holds the uses the database holds: the code sold again
	// above, unless its 3 s reservation expired meanwhile (a slow run).
	testenv.Eventually(t, "the campaign's gate to hold what the database holds", func() (bool, string) {
		var live int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM voucher_redemption WHERE voucher_code = ANY($1) AND status IN ('RESERVED', 'CONFIRMED')`, codes).Scan(&live); err != nil {
			return false, err.Error()
		}
		g := campaignGate(t, redisURL, id)
		return g.stock == 3-live && g.codes[codes[3]] == 0, fmt.Sprintf("stock %d with %d live in the database, codes %v; want %s holding none", g.stock, live, g.codes, codes[3])
	})
}

// An operator's rebuild of a campaign's gate (the dashboard's Rebuild gate,
// named by any code of the campaign or by the gate's ~C<id> of its drift
// report) replaces the whole gate from the database, code uses included.
func TestFlashCampaign_ARebuildReplacesTheCampaignsGate(t *testing.T) {
	t.Parallel()
	s, rs, rdb, db := ownRedisServer(t)
	api := restAPI{s}
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 4, UsesPerCode: 1, TotalLimit: 3, PerUserLimit: 1, Flash: true})
	for i := range 2 {
		if r := api.reserve(t, codes[i], int64(i+1), uniqueOrder(), 5000); r.status() != "RESERVED" {
			t.Fatalf("reserve %d: %+v", i, r)
		}
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	formToken := func(page string) string {
		t.Helper()
		resp, err := client.Get(s.URL + page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfInput.FindSubmatch(body)
		if m == nil {
			t.Fatalf("no CSRF token on %s (%d)", page, resp.StatusCode)
		}
		return string(m[1])
	}
	resp, err := client.PostForm(s.URL+"/admin/sign-in", url.Values{"email": {"dev@localhost"}, "password": {"dev-password"}, "csrf": {formToken("/admin/sign-in")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ctx := context.Background()
	prefix := "voucher:{~C" + id + "}:"
	for _, name := range []string{codes[2], "~C" + id} {
		// The gate too high and forgetting its codes: only a rebuild
		// raises or repairs it that way.
		if err := rdb.Set(ctx, prefix+"stock", 3, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, prefix+"codes").Err(); err != nil {
			t.Fatal(err)
		}
		token := formToken("/admin/drift/" + codes[2] + "/rebuild")
		resp, err := client.PostForm(s.URL+"/admin/drift/"+url.PathEscape(name)+"/rebuild", url.Values{"csrf": {token}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Request.URL.String(), "notice=rebuilt") {
			t.Fatalf("rebuild by %s: %d at %s\n%s", name, resp.StatusCode, resp.Request.URL, body)
		}
		assertGateIsTheDatabase(t, rs.URL, db, id)
		if g := campaignGate(t, rs.URL, id); g.stock != 1 || len(g.codes) != 2 {
			t.Errorf("the gate rebuilt by %s: %+v", name, g)
		}
	}
	if r := api.reserve(t, codes[0], 10, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
		t.Errorf("a used code after the rebuild: %+v", r)
	}
}

// TestFlashCampaign_CheckAgreesWithTheReserveAndIsReadAtTheGate: a check of
// a flash campaign's code answers what the reserve after it does in each
// outcome (a success, the code used up, the customer at the campaign's
// limit on another code, the campaign sold out), read from the campaign's
// gate as a flash voucher's check is, not from the database: a stampede of
// checks on a mailing's codes costs the database nothing.
func TestFlashCampaign_CheckAgreesWithTheReserveAndIsReadAtTheGate(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, _ := ownDatabase(t)
	s := startServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL})
	_, codes := readyCampaign(t, s, campaignSpec{CodeCount: 3, UsesPerCode: 1, TotalLimit: 2, PerUserLimit: 1, Flash: true})
	api := restAPI{s}
	const calls = `voucher_gate_calls_total{op="availability",result="ok"}`
	before := metricValue(t, s, calls)
	checkAgrees(t, api, "a success", codes[0], 1, 5000, "", "")
	checkAgrees(t, api, "the code used up", codes[0], 2, 5000, "", "OUT_OF_STOCK")
	checkAgrees(t, api, "the customer at the campaign's limit, on another code", codes[1], 1, 5000, "", "ALREADY_USED")
	checkAgrees(t, api, "the campaign's last use", codes[1], 2, 5000, "", "")
	checkAgrees(t, api, "the campaign sold out, on a fresh code", codes[2], 3, 5000, "", "OUT_OF_STOCK")
	if got := metricValue(t, s, calls) - before; got < 5 {
		t.Errorf("5 checks of a flash campaign's codes asked its gate %v times; want each read there", got)
	}
}

// TestFlashCampaign_ReconciliationNamesTheCodesWhoseUsesDiffer: a pass
// compares each code's uses at the campaign's gate with the database's.
// After a sale with a release (an order the gate released and the database
// still counted is no difference) none differ; a code the gate counts used
// while the database has it free (that code is refused at the gate: an
// undersell) and one the gate forgot are named, sorted, and alerted once a
// second pass still sees them; when the gate agrees again the report is
// clear and the alert gone.
func TestFlashCampaign_ReconciliationNamesTheCodesWhoseUsesDiffer(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1s"})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	api := restAPI{s}
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 4, UsesPerCode: 1, TotalLimit: 3, PerUserLimit: 1, Flash: true})
	var orders []string
	for i := range 3 {
		order := uniqueOrder()
		if r := api.reserve(t, codes[i], int64(i+1), order, 5000); r.status() != "RESERVED" {
			t.Fatalf("reserve %d: %+v", i, r)
		}
		orders = append(orders, order)
	}
	if r := api.release(t, codes[2], orders[2]); r.status() != "RELEASED" {
		t.Fatalf("release: %+v", r)
	}
	gate := "~C" + id
	// report waits for a pass that began after now and returns what it
	// found: the codes named and whether it alerted.
	report := func(what string, want []string, alert bool) {
		t.Helper()
		after := time.Now()
		deadline := after.Add(20 * time.Second)
		var codesDiffering []string
		var alerted bool
		for time.Now().Before(deadline) {
			var checked time.Time
			err := db.QueryRow(context.Background(), `SELECT codes_differing, alert, checked_at FROM drift_report WHERE voucher_code = $1 ORDER BY id DESC LIMIT 1`, gate).
				Scan(&codesDiffering, &alerted, &checked)
			if err == nil && checked.After(after) && slices.Equal(codesDiffering, want) && alerted == alert {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !slices.Equal(codesDiffering, want) || alerted != alert {
			t.Fatalf("%s: the latest report names %q (alert %v); want %q (alert %v)", what, codesDiffering, alerted, want, alert)
		}
	}
	report("after the sale and a release", []string{}, false)
	r := gql(t, s, adminToken, `{ driftReports { voucherCode codesDiffering } }`, nil)
	if !strings.Contains(r.Raw, `"voucherCode":"`+gate+`","codesDiffering":[]`) {
		t.Errorf("driftReports over GraphQL: %s", r.Raw)
	}

	// The gate counts codes[3] used (the database has it free) and has
	// forgotten codes[0]'s use.
	ctx := context.Background()
	key := "voucher:{" + gate + "}:codes"
	if err := rdb.HSet(ctx, key, codes[3], 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HDel(ctx, key, codes[0]).Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{codes[0], codes[3]}
	slices.Sort(want)
	if r := api.reserve(t, codes[3], 9, uniqueOrder(), 5000); r.Error != "OUT_OF_STOCK" {
		t.Fatalf("a reserve of the code the gate counts used: %+v, want OUT_OF_STOCK (the undersell the report shows)", r)
	}
	report("two passes after the gate's codes changed", want, true)
	if v := metricValue(t, s, `voucher_gate_drift_alert{voucher="`+gate+`"}`); v != 1 {
		t.Errorf("the alert metric of %s: %v, want 1 while its codes differ", gate, v)
	}
	r = gql(t, s, adminToken, `{ driftReports { voucherCode codesDiffering } }`, nil)
	if !strings.Contains(r.Raw, `"codesDiffering":["`+want[0]+`","`+want[1]+`"]`) {
		t.Errorf("driftReports over GraphQL: %s, want %v", r.Raw, want)
	}

	// The gate agrees again: the next pass is clear.
	if err := rdb.HDel(ctx, key, codes[3]).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, key, codes[0], 1).Err(); err != nil {
		t.Fatal(err)
	}
	report("once the gate agrees", []string{}, false)
}

// In kafka mode the same new orderId sent at the same instant to a kafka
// flash voucher and to a code written in the request (a flash campaign's,
// or an ordinary voucher's) has one success at most, and no success is
// lost: the one written in the request takes the orderId's claim before its
// write, so the flash voucher's gate (which reads claims, not the database)
// refuses it, or the gate took it first and the write is refused; a
// success of the flash voucher whose event the database then refused (its
// orderId held by the other) would be a dead letter. One of the two may
// answer UNAVAILABLE while the other is undecided; its retry is decided.
func TestKafka_OneOrderIDOnTwoWritePathsAtOnceHasOneSuccess(t *testing.T) {
	t.Parallel()
	_, brokers := testBroker(t)
	s := kafkaServer(t, map[string]string{"KAFKA_BROKERS": brokers})
	api := restAPI{s}
	_, codes := readyCampaign(t, s, campaignSpec{CodeCount: 40, UsesPerCode: 1, TotalLimit: 40, PerUserLimit: 40, Flash: true})
	ordinary := createVoucher(t, s, voucherSpec{TotalLimit: 40, PerUserLimit: 40})
	flashVoucher := createVoucher(t, s, flash(voucherSpec{TotalLimit: 80, PerUserLimit: 80}))
	customer := time.Now().UnixNano()%1_000_000_000 + 1
	for round := range 20 {
		other := codes[round]
		if round%2 == 1 {
			other = ordinary
		}
		order := uniqueOrder()
		var wg sync.WaitGroup
		start := make(chan struct{})
		var onFlash, onOther result
		wg.Go(func() { <-start; onFlash = api.reserve(t, flashVoucher, customer, order, 5000) })
		wg.Go(func() { <-start; onOther = api.reserve(t, other, customer, order, 5000) })
		close(start)
		wg.Wait()
		// UNAVAILABLE is the answer while the other's write is undecided
		// (a claim alone proves no reservation): its retry, once both have
		// answered, is decided.
		if onFlash.Error == "UNAVAILABLE" {
			onFlash = api.reserve(t, flashVoucher, customer, order, 5000)
		}
		if onOther.Error == "UNAVAILABLE" {
			onOther = api.reserve(t, other, customer, order, 5000)
		}
		if onFlash.Error == "" && onOther.Error == "" {
			t.Errorf("round %d: order %s reserved on %s and on %s", round, order, flashVoucher, other)
		}
		for _, r := range []result{onFlash, onOther} {
			if r.Error != "" && r.Error != "ORDER_CONFLICT" {
				t.Errorf("round %d: %+v, want a reservation or ORDER_CONFLICT", round, r)
			}
		}
	}
	waitApplied(t, brokers)
	assertNoDeadLetters(t, s.db, flashVoucher)
}

// A winner whose database write outlasts several reconciliation passes
// (a loaded database; here its code's row is held by another transaction)
// is not taken for a leak: the gate keeps its use, the reserve is answered
// RESERVED, and the passes after its commit find the gate and the database
// agreeing. It was forgotten at the gate once two passes half an interval
// apart had seen it there alone, leaving the code a use short at the gate
// for good (a drift alert naming it, and a retry of the order admitted
// again).
func TestFlashCampaign_ASlowWinnerWriteIsNotTakenForALeak(t *testing.T) {
	t.Parallel()
	rs := testredis.Start(t)
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"REDIS_URL": rs.URL, "DATABASE_URL": dbURL, "RECONCILE_INTERVAL": "1s"})
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	api := restAPI{s}
	id, codes := readyCampaign(t, s, campaignSpec{CodeCount: 4, UsesPerCode: 1, TotalLimit: 3, PerUserLimit: 1, Flash: true})
	gate := "~C" + id
	ctx := context.Background()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM voucher_code WHERE code = $1 FOR UPDATE`, codes[0]); err != nil {
		t.Fatal(err)
	}
	done := make(chan result, 1)
	go func() { done <- api.reserve(t, codes[0], 1, uniqueOrder(), 5000) }()
	// The write waits while passes run: three, so at least two see the
	// order only in the gate before the row is let go.
	waitPasses(t, db, gate, 3)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.status() != "RESERVED" {
		t.Fatalf("the slow winner: %+v", r)
	}
	waitPasses(t, db, gate, 2)
	var n int
	var last []string
	var repaired string
	if err := db.QueryRow(ctx, `SELECT count(*), coalesce(string_agg(repaired, ' ' ORDER BY id), ''),
		(SELECT codes_differing FROM drift_report WHERE voucher_code = $1 ORDER BY id DESC LIMIT 1)
		FROM drift_report WHERE voucher_code = $1`, gate).Scan(&n, &repaired, &last); err != nil {
		t.Fatal(err)
	}
	if len(last) != 0 || strings.Contains(repaired, "leaked") {
		t.Errorf("after %d passes the latest names %q as differing, repairs %q; want none", n, last, repaired)
	}
	if got, err := rdb.HGet(ctx, "voucher:{"+gate+"}:codes", codes[0]).Int(); err != nil || got != 1 {
		t.Errorf("the gate's uses of the slow winner's code: %d (%v), want 1", got, err)
	}
}
