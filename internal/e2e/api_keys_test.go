package e2e

import (
	"context"
	"crypto/sha256"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

const createApiKeyMutation = `mutation($in: CreateApiKeyInput!) { createApiKey(input: $in) {
	apiKey { id name role prefix createdAt expiresAt revokedAt lastUsedAt ratePerSecond burst } secret error { code field message } } }`

// apiKeyServers are two servers over one database and one Redis that
// learn of a revoked key only through Redis pub/sub: their TTL backstop is
// an hour, so a refusal within a second is the message's doing.
func apiKeyServers(t *testing.T) (a, b *server) {
	t.Helper()
	env := map[string]string{"API_KEY_TTL": "1h"}
	return startServer(t, env), startServer(t, env)
}

// createKey makes a key over GraphQL with the admin token and returns its
// id and secret.
func createKey(t *testing.T, s *server, token string, in map[string]any) (id, secret string) {
	t.Helper()
	r := gql(t, s, token, createApiKeyMutation, map[string]any{"in": in})
	id = str(path(r.Body, "data", "createApiKey", "apiKey", "id"))
	secret = str(path(r.Body, "data", "createApiKey", "secret"))
	if id == "" || secret == "" {
		t.Fatalf("createApiKey %v: %s", in, r.Raw)
	}
	return id, secret
}

// reserveWith reserves a use of code for a fresh order with a bearer
// token, over REST, and returns the HTTP answer.
func reserveWith(t *testing.T, s *server, token, code string) response {
	t.Helper()
	return do(t, http.MethodPost, s.URL+"/vouchers/"+url.PathEscape(code)+"/reservations", token,
		map[string]any{"customerId": rand.Int64N(1<<40) + 1, "orderId": uniqueOrder(), "orderAmount": 5000})
}

func bigVoucher(t *testing.T, s *server) string {
	t.Helper()
	return createVoucher(t, s, voucherSpec{TotalLimit: 100000, PerUserLimit: 1})
}

func keyName(what string) string { return what + " " + uniqueOrder() }

// TestApiKeys_MadeOnOneServerWorksOnTheOtherAndRevokedIsRefusedOnBothWithinASecond:
// a key an admin makes on one server is a bearer token of its role on the
// other at once; the secret is vk_live_ and 32+ random characters, answered
// once, stored only as its SHA-256; the list shows its prefix, never the
// secret; once revoked on one server, both refuse it (401, the contract's
// body) within a second, learnt through Redis; creating and revoking are
// audited with who did it; the listed tokens keep working throughout.
func TestApiKeys_MadeOnOneServerWorksOnTheOtherAndRevokedIsRefusedOnBothWithinASecond(t *testing.T) {
	t.Parallel()
	a, b := apiKeyServers(t)
	code := bigVoucher(t, a)

	// An admin key, made with the listed admin token, makes the storefront key.
	adminName := keyName("ops script")
	adminID, adminKey := createKey(t, a, adminToken, map[string]any{"name": adminName, "role": "ADMIN"})
	name := keyName("checkout service")
	r := gql(t, b, adminKey, createApiKeyMutation, map[string]any{"in": map[string]any{"name": name, "role": "STOREFRONT"}})
	id := str(path(r.Body, "data", "createApiKey", "apiKey", "id"))
	secret := str(path(r.Body, "data", "createApiKey", "secret"))
	if id == "" || !regexp.MustCompile(`^vk_live_[A-Za-z0-9_-]{32,}$`).MatchString(secret) {
		t.Fatalf("createApiKey with an admin key on the other server: %s", r.Raw)
	}
	k := path(r.Body, "data", "createApiKey", "apiKey")
	if str(path(k, "role")) != "STOREFRONT" || str(path(k, "name")) != name || !strings.HasPrefix(secret, str(path(k, "prefix"))) ||
		len(str(path(k, "prefix"))) < len("vk_live_")+4 || len(str(path(k, "prefix"))) >= len(secret)-16 || path(k, "revokedAt") != nil {
		t.Errorf("the new key: %s", r.Raw)
	}
	hash := sha256.Sum256([]byte(secret))
	var stored int
	if err := database(t).QueryRow(context.Background(),
		`SELECT count(*) FROM api_key WHERE id = $1 AND secret_hash = $2 AND strpos(name || prefix || created_by, $3) = 0`, id, hash[:], secret).Scan(&stored); err != nil || stored != 1 {
		t.Errorf("the key is not stored as its SHA-256 alone: %d rows, %v", stored, err)
	}

	// Made on B, it works on A at once, and on B, with the storefront role.
	for _, s := range []*server{a, b} {
		if got := reserveWith(t, s, secret, code); got.Status != http.StatusCreated {
			t.Fatalf("a reserve with the new key on %s: %d %s", s.URL, got.Status, got.Raw)
		}
	}
	forbidden := gql(t, a, secret, `{ apiKeys { id } }`, nil)
	if str(path(firstError(forbidden), "extensions", "code")) != "FORBIDDEN" {
		t.Errorf("a storefront key listing keys: %s", forbidden.Raw)
	}

	// The list shows the key without its secret, on either server.
	list := gql(t, a, adminToken, `{ apiKeys { id name role prefix createdAt lastUsedAt expiresAt revokedAt ratePerSecond burst } }`, nil)
	if strings.Contains(list.Raw, secret) || strings.Contains(list.Raw, secret[len("vk_live_")+8:]) {
		t.Fatalf("the list carries the secret: %s", list.Raw)
	}
	if listed := keyListed(list, id); listed == nil || str(path(listed, "prefix")) != str(path(k, "prefix")) {
		t.Errorf("the list does not show the key %s with its prefix: %s", id, list.Raw)
	}

	// Revoked on A (by the admin key): refused on both within a second.
	rv := gql(t, a, adminKey, `mutation($id: ID!) { revokeApiKey(id: $id) { apiKey { id revokedAt } secret error { code } } }`, map[string]any{"id": id})
	if str(path(rv.Body, "data", "revokeApiKey", "apiKey", "revokedAt")) == "" || path(rv.Body, "data", "revokeApiKey", "secret") != nil {
		t.Fatalf("revokeApiKey: %s", rv.Raw)
	}
	for _, s := range []*server{b, a} {
		testenv.EventuallyWithin(t, time.Second, "the revoked key refused on "+s.URL, func() (bool, string) {
			got := reserveWith(t, s, secret, code)
			return got.Status == http.StatusUnauthorized && str(got.Body["error"]) == "UNAUTHENTICATED", strconv.Itoa(got.Status) + " " + got.Raw
		})
	}
	// Revoking again changes nothing; the listed tokens still work.
	again := gql(t, b, adminToken, `mutation($id: ID!) { revokeApiKey(id: $id) { apiKey { revokedAt } error { code } } }`, map[string]any{"id": id})
	if str(path(again.Body, "data", "revokeApiKey", "apiKey", "revokedAt")) != str(path(rv.Body, "data", "revokeApiKey", "apiKey", "revokedAt")) {
		t.Errorf("revoking again moved revokedAt: %s then %s", rv.Raw, again.Raw)
	}
	unknown := gql(t, b, adminToken, `mutation { revokeApiKey(id: "999999999999") { apiKey { id } error { code } } }`, nil)
	if str(path(unknown.Body, "data", "revokeApiKey", "error", "code")) != "NOT_FOUND" {
		t.Errorf("revoking an unknown key: %s", unknown.Raw)
	}
	for _, s := range []*server{a, b} {
		if got := reserveWith(t, s, storefrontToken, code); got.Status != http.StatusCreated {
			t.Errorf("the listed storefront token on %s: %d %s", s.URL, got.Status, got.Raw)
		}
	}

	// The audit log: who created and who revoked, once each.
	rows, err := database(t).Query(context.Background(), `SELECT action, actor, actor_role FROM api_key_audit WHERE key_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	for rows.Next() {
		var action, actor, role string
		if err := rows.Scan(&action, &actor, &role); err != nil {
			t.Fatal(err)
		}
		audit = append(audit, action+" by "+actor+" ("+role+")")
	}
	rows.Close()
	want := []string{"created by key:" + adminName + " (admin)", "revoked by key:" + adminName + " (admin)"}
	if strings.Join(audit, "; ") != strings.Join(want, "; ") {
		t.Errorf("the audit log of the key: %q, want %q", audit, want)
	}
	var adminCreated string
	if err := database(t).QueryRow(context.Background(), `SELECT actor FROM api_key_audit WHERE key_id = $1 AND action = 'created'`, adminID).Scan(&adminCreated); err != nil || adminCreated != "token" {
		t.Errorf("the admin key's creation is recorded as by %q (%v), want the listed token", adminCreated, err)
	}
}

// TestApiKeys_AnUnknownOrExpiredKeyIsRefused: a key past its expiresAt is
// 401 on every server without anyone revoking it, as is a vk_live_ key
// nobody made.
func TestApiKeys_AnUnknownOrExpiredKeyIsRefused(t *testing.T) {
	t.Parallel()
	a, b := apiKeyServers(t)
	code := bigVoucher(t, a)
	expires := time.Now().Add(3 * time.Second)
	_, secret := createKey(t, a, adminToken, map[string]any{"name": keyName("short-lived"), "role": "STOREFRONT", "expiresAt": expires.Format(time.RFC3339Nano)})
	if got := reserveWith(t, b, secret, code); got.Status != http.StatusCreated && time.Now().Before(expires) {
		t.Fatalf("a key before its expiry: %d %s", got.Status, got.Raw)
	}
	for _, s := range []*server{a, b} {
		testenv.EventuallyWithin(t, 10*time.Second, "the expired key refused on "+s.URL, func() (bool, string) {
			got := reserveWith(t, s, secret, code)
			return got.Status == http.StatusUnauthorized && str(got.Body["error"]) == "UNAUTHENTICATED", strconv.Itoa(got.Status)
		})
	}
	if got := reserveWith(t, a, "vk_live_"+strings.Repeat("x", 43), code); got.Status != http.StatusUnauthorized || str(got.Body["error"]) != "UNAUTHENTICATED" {
		t.Errorf("a key nobody made: %d %s", got.Status, got.Raw)
	}
}

// TestApiKeys_ARateIsSharedByEveryServer: a key of 2 requests a second
// sending 40 requests at once, half to each of two servers, is allowed its
// burst (2) and then what the rate refills, over both together, never twice
// that; the excess is 429 {"error": "RATE_LIMITED"} with Retry-After on
// REST, and a GraphQL error with that code on /graphql. A key without a
// rate is never limited. (At once, and a low rate: sent one after the other
// on a machine busy enough, 30 requests at 5 a second took 23 s and the
// rate refilled before each, so neither server refused.)
func TestApiKeys_ARateIsSharedByEveryServer(t *testing.T) {
	t.Parallel()
	a, b := apiKeyServers(t)
	code := bigVoucher(t, a)
	const rate = 2
	_, limited := createKey(t, a, adminToken, map[string]any{"name": keyName("rated"), "role": "STOREFRONT", "ratePerSecond": rate})
	_, free := createKey(t, a, adminToken, map[string]any{"name": keyName("unrated"), "role": "STOREFRONT"})

	const sent = 40
	servers := []*server{a, b} // request i goes to servers[i%2]
	answers := make([]response, sent)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range sent {
		wg.Go(func() { answers[i] = reserveWith(t, servers[i%2], limited, code) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed, refusedOn := 0, map[string]int{}
	for i, got := range answers {
		switch got.Status {
		case http.StatusCreated:
			allowed++
		case http.StatusTooManyRequests:
			refusedOn[servers[i%2].URL]++
			retry, err := strconv.Atoi(got.Header("Retry-After"))
			if str(got.Body["error"]) != "RATE_LIMITED" || err != nil || retry < 1 {
				t.Errorf("a request over the rate: %d Retry-After %q %s", got.Status, got.Header("Retry-After"), got.Raw)
			}
		default:
			t.Fatalf("a request of the rated key: %d %s", got.Status, got.Raw)
		}
	}
	// GCRA: the burst at once, then one every 500 ms, over both servers.
	ceiling := rate + int(rate*elapsed.Seconds()) + 1
	if allowed < rate || allowed > ceiling {
		t.Errorf("%d of %d requests allowed in %v over two servers; want %d to %d (a rate per server would allow about twice)", allowed, sent, elapsed, rate, ceiling)
	}
	if refusedOn[a.URL] == 0 || refusedOn[b.URL] == 0 {
		t.Errorf("refusals by server: %v (in %v); want both to refuse", refusedOn, elapsed)
	}

	testenv.Eventually(t, "a GraphQL request over the rate answered RATE_LIMITED", func() (bool, string) {
		r := gql(t, b, limited, `{ __typename }`, nil)
		return r.Status == http.StatusTooManyRequests && str(path(firstError(r), "extensions", "code")) == "RATE_LIMITED", r.Raw
	})

	for i := range sent {
		if got := reserveWith(t, []*server{a, b}[i%2], free, code); got.Status != http.StatusCreated {
			t.Fatalf("a key without a rate, request %d: %d %s", i, got.Status, got.Raw)
		}
	}
}

// TestApiKeys_LastUsedAtIsWrittenOnceAMinuteAtMost: a key's first use shows
// in lastUsedAt within moments; more uses on either server within the
// minute do not write it again.
func TestApiKeys_LastUsedAtIsWrittenOnceAMinuteAtMost(t *testing.T) {
	t.Parallel()
	a, b := apiKeyServers(t)
	code := bigVoucher(t, a)
	id, secret := createKey(t, a, adminToken, map[string]any{"name": keyName("used"), "role": "ADMIN"})
	if got := reserveWith(t, a, secret, code); got.Status != http.StatusCreated {
		t.Fatalf("a reserve with an admin key: %d %s", got.Status, got.Raw)
	}
	var first string
	testenv.Eventually(t, "lastUsedAt set after the first use", func() (bool, string) {
		r := gql(t, b, adminToken, `{ apiKeys { id lastUsedAt } }`, nil)
		first = str(path(keyListed(r, id), "lastUsedAt"))
		return first != "", r.Raw
	})
	for i := range 6 {
		if got := reserveWith(t, []*server{a, b}[i%2], secret, code); got.Status != http.StatusCreated {
			t.Fatalf("use %d: %d %s", i, got.Status, got.Raw)
		}
	}
	var writes int
	if err := database(t).QueryRow(context.Background(),
		`SELECT count(*) FROM api_key WHERE id = $1 AND last_used_at = $2::timestamptz`, id, first).Scan(&writes); err != nil || writes != 1 {
		t.Errorf("lastUsedAt moved within the minute of its first write (%s): %d, %v", first, writes, err)
	}
}

// TestApiKeys_BadInputAndStorefrontCallersChangeNothing: an empty or
// 200-character name, an expiry in the past, a rate or burst under 1 or a
// burst without a rate are INVALID_INPUT naming the field, as data; a
// storefront token is FORBIDDEN; no key is made by any of them.
func TestApiKeys_BadInputAndStorefrontCallersChangeNothing(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	name := keyName("refused")
	past := time.Now().Add(-time.Minute).Format(time.RFC3339)
	for _, tc := range []struct {
		in    map[string]any
		field string
	}{
		{map[string]any{"name": "", "role": "ADMIN"}, "name"},
		{map[string]any{"name": "   ", "role": "ADMIN"}, "name"},
		{map[string]any{"name": strings.Repeat("n", 200), "role": "ADMIN"}, "name"},
		{map[string]any{"name": name, "role": "ADMIN", "expiresAt": past}, "expiresAt"},
		{map[string]any{"name": name, "role": "STOREFRONT", "ratePerSecond": 0}, "ratePerSecond"},
		{map[string]any{"name": name, "role": "STOREFRONT", "ratePerSecond": -5}, "ratePerSecond"},
		{map[string]any{"name": name, "role": "STOREFRONT", "ratePerSecond": 5, "burst": 0}, "burst"},
		{map[string]any{"name": name, "role": "STOREFRONT", "burst": 5}, "burst"},
	} {
		r := gql(t, s, adminToken, createApiKeyMutation, map[string]any{"in": tc.in})
		e := path(r.Body, "data", "createApiKey", "error")
		if r.Status != http.StatusOK || str(path(e, "code")) != "INVALID_INPUT" || !strings.HasSuffix(str(path(e, "field")), tc.field) ||
			path(r.Body, "data", "createApiKey", "apiKey") != nil || path(r.Body, "data", "createApiKey", "secret") != nil {
			t.Errorf("createApiKey %.80v: %s; want INVALID_INPUT on %s as data", tc.in, r.Raw, tc.field)
		}
	}
	// A role spelt in another case, a name that is no string: refused as
	// the GraphQL inputs are, INVALID_INPUT naming the field.
	for _, in := range []map[string]any{{"name": name, "role": "admin"}, {"name": 42, "role": "ADMIN"}} {
		r := gql(t, s, adminToken, createApiKeyMutation, map[string]any{"in": in})
		if str(path(firstError(r), "extensions", "code")) != "INVALID_INPUT" || str(path(firstError(r), "extensions", "field")) == "" {
			t.Errorf("createApiKey %v: %s; want INVALID_INPUT with its field", in, r.Raw)
		}
	}
	ok := gql(t, s, adminToken, createApiKeyMutation, map[string]any{"in": map[string]any{"name": strings.Repeat("n", 199), "role": "ADMIN"}})
	if str(path(ok.Body, "data", "createApiKey", "secret")) == "" {
		t.Errorf("a name of 199 characters: %s", ok.Raw)
	}
	for _, op := range []string{
		`mutation { createApiKey(input: {name: "` + name + `", role: ADMIN}) { secret error { code } } }`,
		`mutation { revokeApiKey(id: "1") { apiKey { id } error { code } } }`,
		`{ apiKeys { id } }`,
	} {
		r := gql(t, s, storefrontToken, op, nil)
		if str(path(firstError(r), "extensions", "code")) != "FORBIDDEN" || strings.Contains(r.Raw, "vk_live_") {
			t.Errorf("a storefront token: %s", r.Raw)
		}
	}
	var made int
	if err := s.db.QueryRow(context.Background(), `SELECT count(*) FROM api_key WHERE name = $1`, name).Scan(&made); err != nil || made != 0 {
		t.Errorf("%d keys named %q were made by refused requests (%v)", made, name, err)
	}
}

// firstError is the first of a GraphQL answer's errors.
func firstError(r response) any {
	errs, _ := r.Body["errors"].([]any)
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// keyListed is the key of an id in an apiKeys answer.
func keyListed(r response, id string) any {
	keys, _ := path(r.Body, "data", "apiKeys").([]any)
	for _, k := range keys {
		if str(path(k, "id")) == id {
			return k
		}
	}
	return nil
}
