package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"

	"voucherd/internal/accounts"
	"voucherd/internal/app"
	"voucherd/internal/postgres"
	"voucherd/internal/voucher"
)

// signInClient is a browser on its own loopback address (127.x.y.z, all of
// which reach the server on Linux), so the per-address limit of one test
// never touches another's.
type signInClient struct {
	s       *server
	address string
	http    *http.Client
}

func newSignInClient(t *testing.T, s *server) *signInClient {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	address := fmt.Sprintf("127.%d.%d.%d", b[0], b[1], 1+b[2]%250)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(address)}}
	return &signInClient{s: s, address: address, http: &http.Client{
		Transport:     &http.Transport{DialContext: dialer.DialContext, MaxConnsPerHost: 200, MaxIdleConnsPerHost: 200},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn fetches the sign-in form (its CSRF token and cookie) and posts it
// back with the credentials, as a browser does; it returns the status.
func (c *signInClient) signIn(t *testing.T, email, password string) int {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := *c.http
	client.Jar = jar
	resp, err := client.Get(c.s.URL + "/admin/sign-in")
	if err != nil {
		t.Errorf("GET the sign-in form: %v", err)
		return 0
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfInput.FindSubmatch(page)
	if m == nil {
		t.Errorf("the sign-in form carries no CSRF token: %s", page)
		return 0
	}
	resp, err = client.PostForm(c.s.URL+"/admin/sign-in", url.Values{"email": {email}, "password": {password}, "csrf": {string(m[1])}})
	if err != nil {
		t.Errorf("POST the sign-in form: %v", err)
		return 0
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assertNothingLeaked(t, string(body))
	if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
		t.Error("a 429 without Retry-After")
	}
	return resp.StatusCode
}

// stampedeSignIns posts n sign-ins at the same moment and counts the answers
// by status.
func (c *signInClient) stampedeSignIns(t *testing.T, n int, email func(i int) string, password string) map[int]int {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	statuses := map[int]int{}
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			st := c.signIn(t, email(i), password)
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return statuses
}

// failedChecks counts the password checks that failed, as the database
// recorded them.
func failedChecks(t *testing.T, db *pgxpool.Pool, column, value string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(),
		`SELECT count(*) FROM dashboard_sign_in_attempt WHERE outcome = 'failed' AND `+column+` = $1`, value).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// voucherdCommand runs a voucherd subcommand against the database.
func voucherdCommand(t *testing.T, dbURL string, args ...string) string {
	t.Helper()
	settings := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "STOREFRONT_TOKENS": storefrontToken, "ADMIN_TOKENS": adminToken, "LOG_LEVEL": "error"}
	var out bytes.Buffer
	if err := app.Run(context.Background(), args, func(k string) string { return settings[k] }, &out, io.Discard); err != nil {
		t.Fatalf("voucherd %s: %v", strings.Join(args, " "), err)
	}
	return out.String()
}

// TestSignIn_ConcurrentGuessesAreCheckedAtMostFivePerEmail: a hundred wrong
// passwords for one email sent at the same moment get at most 5 password
// checks; then the right password is refused (429) until an admin lifts the
// lock, and another user behind the same address signs in meanwhile.
func TestSignIn_ConcurrentGuessesAreCheckedAtMostFivePerEmail(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	victim, colleague := "victim-"+uniqueOrder()+"@example.com", "colleague-"+uniqueOrder()+"@example.com"
	const password = "the right password"
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, victim, "Victim", "admin", password)
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, colleague, "Colleague", "marketer", password)
	// The victim's hash at the product's cost (TestMain lowers it): each
	// check takes as long as in the product, so the hundred overlap.
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), `UPDATE dashboard_user SET password_hash = $1 WHERE email = $2`, hash, victim); err != nil {
		t.Fatal(err)
	}
	c := newSignInClient(t, s)

	statuses := c.stampedeSignIns(t, 100, func(int) string { return victim }, "a wrong guess")
	if statuses[http.StatusUnauthorized] > 5 || statuses[http.StatusUnauthorized]+statuses[http.StatusTooManyRequests] != 100 {
		t.Errorf("100 concurrent wrong passwords answered %v, want at most 5 401s and the rest 429", statuses)
	}
	if n := failedChecks(t, db, "email", victim); n > 5 || n == 0 {
		t.Errorf("%d failed password checks recorded for the email, want 1-5", n)
	}
	if st := c.signIn(t, victim, password); st != http.StatusTooManyRequests {
		t.Errorf("the right password of a locked email: HTTP %d, want 429", st)
	}
	if st := newSignInClient(t, s).signIn(t, victim, password); st != http.StatusTooManyRequests {
		t.Errorf("the right password of a locked email from another address: HTTP %d, want 429", st)
	}
	if st := c.signIn(t, colleague, password); st != http.StatusSeeOther {
		t.Errorf("another user behind the same address: HTTP %d, want 303 (signed in)", st)
	}

	if out := voucherdCommand(t, dbURL, "user", "unlock", "-email", victim); !strings.Contains(out, "lifted") {
		t.Errorf("voucherd user unlock -email printed %q", out)
	}
	if st := c.signIn(t, victim, password); st != http.StatusSeeOther {
		t.Errorf("the right password once an admin lifted the lock: HTTP %d, want 303", st)
	}
}

// TestSignIn_UnlockAddressLiftsTheAddressLock: `voucherd user unlock
// -address` lifts a locked address. (The per-address limit under
// concurrency is web's TestSignIn_ConcurrentGuessesFromOneAddressAreCheckedAtMostItsLimit,
// with a small limit: each check is a bcrypt, 1.5 s under -race.)
func TestSignIn_UnlockAddressLiftsTheAddressLock(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	ctx := context.Background()
	user := "user-" + uniqueOrder() + "@example.com"
	const password = "the right password"
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, user, "User", "operator", password)
	accts := accounts.New(postgres.New(db), accounts.AccountsConfig{MaxAddressFailures: 2})
	const address = "203.0.113.77"
	for i := range 2 {
		if _, _, _, err := accts.SignIn(ctx, address, fmt.Sprintf("guess-%d@example.com", i), "wrong"); voucher.ErrorCodeOf(err) != accounts.BadCredentials {
			t.Fatalf("wrong guess #%d: %v", i+1, err)
		}
	}
	if _, _, _, err := accts.SignIn(ctx, address, user, password); voucher.ErrorCodeOf(err) != accounts.TooManyAttempts {
		t.Fatalf("the right password from a locked address: %v, want TOO_MANY_ATTEMPTS", err)
	}
	if out := voucherdCommand(t, dbURL, "user", "unlock", "-address", address); !strings.Contains(out, "lifted: 2 failed attempt(s)") {
		t.Errorf("voucherd user unlock -address printed %q, want 2 attempts lifted", out)
	}
	if _, _, _, err := accts.SignIn(ctx, address, user, password); err != nil {
		t.Errorf("the right password once the address is unlocked: %v", err)
	}
	if n := failedChecks(t, db, "address", address); n != 2 {
		t.Errorf("%d failed checks kept for the address, want the 2 (lifted, not deleted)", n)
	}
}
