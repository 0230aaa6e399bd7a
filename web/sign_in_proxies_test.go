package web_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"voucherd/internal/accounts"
	"voucherd/internal/clientaddr"
	"voucherd/internal/voucher"
	"voucherd/web"
)

// randomIPv4 is an address of 198.18.0.0/15 (kept for benchmarks, never a
// real client) of its own, so no other test or earlier run shares its
// sign-in failures.
func randomIPv4() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("198.%d.%d.%d", 18+b[0]%2, b[1], 1+b[2]%254)
}

// randomIPv6Net is a /64 of 2001:db8::/32 (documentation) of its own, as
// "2001:db8:xxxx:yyyy:"; append an interface id ("::1", "0:0:0:2").
func randomIPv6Net() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("2001:db8:%x:%x:", int(b[0])<<8|int(b[1]), int(b[2])<<8|int(b[3]))
}

// signInVia posts the sign-in form from a peer address, with the
// X-Forwarded-For header a proxy would send (none when empty).
func signInVia(t *testing.T, f fixture, email, pass, peer, forwardedFor string) int {
	t.Helper()
	page := f.do(t, http.MethodGet, "/admin/sign-in", nil, nil, nil)
	token, _ := doc(t, page).Find(`input[name=csrf]`).Attr("value")
	form := url.Values{"email": {email}, "password": {pass}, "csrf": {token}}
	req := httptest.NewRequest(http.MethodPost, "/admin/sign-in", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr = peer
	if forwardedFor != "" {
		req.Header.Set("X-Forwarded-For", forwardedFor)
	}
	for _, c := range page.Result().Cookies() {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec.Code
}

// guesses signs in n times with wrong passwords for emails nobody has, the
// i-th from the peer and with the X-Forwarded-For that from(i) gives.
func guesses(t *testing.T, f fixture, n int, from func(i int) (peer, forwardedFor string)) {
	t.Helper()
	for i := range n {
		peer, forwardedFor := from(i)
		if code := signInVia(t, f, fmt.Sprintf("guess-%d-%s@example.com", i, unique()), "wrong password", peer, forwardedFor); code != http.StatusUnauthorized {
			t.Fatalf("wrong password #%d: %d, want 401", i+1, code)
		}
	}
}

// TestSignIn_BehindATrustedProxyTheLimitIsTheClientsNotTheProxys: with the
// load balancer's range in TRUSTED_PROXIES, one client's wrong passwords
// lock that client (its address from X-Forwarded-For), and another client
// behind the same load balancer still signs in; a client cannot get round
// its lock by sending an X-Forwarded-For of its own, through the proxy or
// straight to the server.
func TestSignIn_BehindATrustedProxyTheLimitIsTheClientsNotTheProxys(t *testing.T) {
	t.Parallel()
	trusted, err := clientaddr.ParseTrusted("10.0.0.0/8, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, web.Config{ClientAddresses: trusted})
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	proxy := fmt.Sprintf("10.%d.%d.%d:443", b[0], b[1], 1+b[2]%254)
	attacker, neighbour := randomIPv4(), randomIPv4()

	// Six wrong passwords (the fixture's limit per address) from one
	// client, each with a made-up address of its own in front of the
	// one the proxy appends.
	guesses(t, f, 6, func(i int) (string, string) { return proxy, fmt.Sprintf("203.0.113.%d, %s", i+1, attacker) })
	if code := signInVia(t, f, f.users[voucher.RoleAdmin], password, proxy, "203.0.113.99, "+attacker); code != http.StatusTooManyRequests {
		t.Errorf("the locked client with the right password and a new made-up address: %d, want 429", code)
	}
	if code := signInVia(t, f, f.users[voucher.RoleAdmin], password, proxy, attacker); code != http.StatusTooManyRequests {
		t.Errorf("the locked client: %d, want 429", code)
	}
	if code := signInVia(t, f, f.users[voucher.RoleAdmin], password, proxy, neighbour); code != http.StatusSeeOther {
		t.Errorf("another client behind the same proxy: %d, want 303 (the lock is the client's, not the proxy's)", code)
	}
	// Two proxies in a row (both trusted): the client is left of them.
	if code := signInVia(t, f, f.users[voucher.RoleAdmin], password, proxy, attacker+", 10.9.9.9"); code != http.StatusTooManyRequests {
		t.Errorf("the locked client through two trusted proxies: %d, want 429", code)
	}
	// The address the admin lifts is the client's, as the locks list shows.
	admin := f.signIn(t, voucher.RoleAdmin)
	if rec := f.do(t, http.MethodGet, "/admin/sign-in-locks", &admin, nil, nil); doc(t, rec).Find(`[data-testid=lock-row][data-key="`+attacker+`"]`).Length() != 1 {
		t.Errorf("the locks page does not list the client %s", attacker)
	}

	// Straight to the server (a peer outside the trusted ranges), the
	// header is the client's own word and is ignored: its peer address is
	// what counts, whatever it claims.
	direct := randomIPv4() + ":50000"
	guesses(t, f, 6, func(i int) (string, string) { return direct, fmt.Sprintf("203.0.113.%d", i+1) })
	if code := signInVia(t, f, f.users[voucher.RoleAdmin], password, direct, randomIPv4()); code != http.StatusTooManyRequests {
		t.Errorf("a direct client claiming another address: %d, want 429 (its own address is locked)", code)
	}
}

// TestSignIn_AnIPv6ClientCountsByItsSlash64: the addresses of one /64 are
// one client for the sign-in limits (a single subscriber has them all);
// another /64 is another client. Also behind a trusted proxy.
func TestSignIn_AnIPv6ClientCountsByItsSlash64(t *testing.T) {
	t.Parallel()
	trusted, err := clientaddr.ParseTrusted("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, web.Config{ClientAddresses: trusted})
	admin := f.users[voucher.RoleAdmin]

	// Straight from the client: six wrong passwords, each from another
	// address of its /64, lock the whole /64 and no other.
	direct := randomIPv6Net()
	guesses(t, f, 6, func(i int) (string, string) {
		return v6Peer(fmt.Sprintf("%s%x:%x:%x:%x", direct, i, i+1, i+2, i+3)), ""
	})
	if code := signInVia(t, f, admin, password, v6Peer(direct+"beef:0:0:1"), ""); code != http.StatusTooManyRequests {
		t.Errorf("a seventh address of the same /64 with the right password: %d, want 429", code)
	}
	if code := signInVia(t, f, admin, password, v6Peer(randomIPv6Net()+":1"), ""); code != http.StatusSeeOther {
		t.Errorf("an address of another /64: %d, want 303", code)
	}

	// Behind a trusted proxy, the same for the forwarded address.
	proxied := randomIPv6Net()
	guesses(t, f, 6, func(i int) (string, string) { return "10.0.0.7:443", fmt.Sprintf("%s:%x", proxied, i+1) })
	if code := signInVia(t, f, admin, password, "10.0.0.7:443", proxied+"ffff:ffff:ffff:ffff"); code != http.StatusTooManyRequests {
		t.Errorf("another address of a locked /64 behind the proxy: %d, want 429", code)
	}
	if code := signInVia(t, f, admin, password, "10.0.0.7:443", randomIPv6Net()+":1"); code != http.StatusSeeOther {
		t.Errorf("another /64 behind the same proxy: %d, want 303", code)
	}

	// The locks list shows the /64, and lifting it from its row lets the
	// /64 in again.
	s := f.signIn(t, voucher.RoleAdmin)
	key := accounts.SignInAddress(direct + ":1") // "2001:db8:x:y::/64"
	row := doc(t, f.do(t, http.MethodGet, "/admin/sign-in-locks", &s, nil, nil)).Find(`[data-testid=lock-row][data-key="` + key + `"]`)
	if row.Length() != 1 {
		t.Fatalf("the locks page does not list %s", key)
	}
	rec := f.do(t, http.MethodPost, "/admin/sign-in-locks", &s, url.Values{"csrf": {s.csrf}, "address": {key}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/sign-in-locks?notice=unlocked" {
		t.Fatalf("lifting %s: %d %s", key, rec.Code, rec.Header().Get("Location"))
	}
	if code := signInVia(t, f, admin, password, v6Peer(direct+"1:2:3:4"), ""); code != http.StatusSeeOther {
		t.Errorf("the /64 once lifted: %d, want 303", code)
	}
	// Lifting by one of its addresses (as `voucherd user unlock -address`
	// would be given) lifts its /64 too.
	ctx := voucher.WithCaller(context.Background(), voucher.Caller{Role: voucher.RoleAdmin, Name: "test"})
	if n, err := f.accounts.LiftLocks(ctx, "", proxied+"abcd:0:0:9"); err != nil || n != 6 {
		t.Errorf("LiftLocks(an address of the proxied /64) = %d, %v; want its 6 failures", n, err)
	}
}

// v6Peer is a RemoteAddr of an IPv6 address.
func v6Peer(addr string) string { return "[" + addr + "]:4711" }
