package faults

import (
	"context"
	"net/http"
	"testing"
	"time"

	"voucherd/internal/testenv"
	"voucherd/internal/testproc"
)

// A `voucherd serve` killed (SIGKILL) in the middle of a campaign's
// generation leaves the campaign GENERATING with the batches it committed,
// none of its codes reservable; another serve takes the generation over
// once the dead one's lease lapses and finishes it to exactly codeCount
// unique codes.
func TestCampaignFaults_SIGKILLMidGenerationLeavesNothingReservableAndResumes(t *testing.T) {
	dbURL := ownDatabase(t)
	db := openDB(t, dbURL)
	env := serveEnv(dbURL, testenv.RedisURL(), nil)
	first := testproc.Serve(t, env)
	const count = 600_000
	out := graphql(t, first.URL, `mutation($in: CreateCampaignInput!) { createCampaign(input: $in) { campaign { id status } error { code message field } } }`,
		map[string]any{"in": map[string]any{
			"name": "killed", "codeCount": count, "codePrefix": "K", "discountAmount": 500,
			"startsAt": time.Now().Add(-time.Hour).Format(time.RFC3339), "endsAt": time.Now().Add(24 * time.Hour).Format(time.RFC3339),
		}})
	id, _ := dig(out, "data", "createCampaign", "campaign", "id").(string)
	if id == "" {
		t.Fatalf("createCampaign: %v", out)
	}
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		var generated int
		if err := db.QueryRow(ctx, `SELECT generated_count FROM campaign WHERE id = $1`, id).Scan(&generated); err != nil {
			t.Fatal(err)
		}
		if generated > 0 && generated < count {
			break
		}
		if generated == count || time.Now().After(deadline) {
			t.Fatalf("never caught the generation halfway (generated %d)", generated)
		}
		time.Sleep(2 * time.Millisecond)
	}
	first.Kill(t)

	var status string
	var generated, stored int
	if err := db.QueryRow(ctx, `SELECT status, generated_count, (SELECT count(*) FROM voucher_code WHERE campaign_id = c.id) FROM campaign c WHERE id = $1`, id).Scan(&status, &generated, &stored); err != nil {
		t.Fatal(err)
	}
	if status != "GENERATING" || generated == 0 || generated >= count || stored != generated {
		t.Fatalf("after the kill: %s, generated_count %d, %d codes stored", status, generated, stored)
	}
	t.Logf("killed at %d of %d codes", generated, count)
	var code string
	if err := db.QueryRow(ctx, `SELECT code FROM voucher_code WHERE campaign_id = $1 ORDER BY seq LIMIT 1`, id).Scan(&code); err != nil {
		t.Fatal(err)
	}

	second := testproc.Serve(t, env)
	// The dead serve's lease lapses 15 s after its last batch; until the
	// campaign is READY, no code of it is reservable.
	reserved := false
	deadline = time.Now().Add(2 * time.Minute)
	for !reserved {
		a := call(ctx, http.MethodPost, second.URL+"/vouchers/"+code+"/reservations", storefrontToken,
			map[string]any{"customerId": 1, "orderId": "o-" + randomHex(6), "orderAmount": 1000})
		var st string
		_ = db.QueryRow(ctx, `SELECT status FROM campaign WHERE id = $1`, id).Scan(&st)
		switch {
		case a.Status == http.StatusCreated:
			if st != "READY" {
				t.Fatalf("a code of a %s campaign was reserved: %s", st, a.Raw)
			}
			reserved = true
		case a.Status == http.StatusNotFound && st != "FAILED":
		default:
			t.Fatalf("reserve of a code of the %s campaign: %d %s", st, a.Status, a.Raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the campaign was not finished within 2 minutes of the restart (%s)", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var rows, distinct, final int
	if err := db.QueryRow(ctx, `SELECT count(*), count(DISTINCT code), (SELECT generated_count FROM campaign WHERE id = $1) FROM voucher_code WHERE campaign_id = $1`, id).Scan(&rows, &distinct, &final); err != nil {
		t.Fatal(err)
	}
	if rows != count || distinct != count || final != count {
		t.Fatalf("resumed campaign: %d codes, %d distinct, generated_count %d; want %d", rows, distinct, final, count)
	}
}
