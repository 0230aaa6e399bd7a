package web_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sync"
	"testing"

	"voucherd/internal/voucher"
	"voucherd/web"
)

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestSignIn_ConcurrentGuessesFromOneAddressAreCheckedAtMostItsLimit: wrong
// passwords for many emails from one address, all at the same moment over
// HTTP, get no more password checks than the address's limit (6 here, 20 in
// the service); then the address is refused for any user until it is lifted.
func TestSignIn_ConcurrentGuessesFromOneAddressAreCheckedAtMostItsLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, web.Config{})
	srv := httptest.NewServer(f.h)
	t.Cleanup(srv.Close)
	// A loopback address of its own (127.x.y.z all reach the server on
	// Linux): the peer address is what the limit counts.
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	address := fmt.Sprintf("127.%d.%d.%d", b[0], b[1], 1+b[2]%250)
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(address)}}
	transport := &http.Transport{DialContext: dialer.DialContext, MaxConnsPerHost: 64}
	signIn := func(email, pass string) int {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Transport: transport, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(srv.URL + "/admin/sign-in")
		if err != nil {
			t.Error(err)
			return 0
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := csrfInput.FindSubmatch(page)
		if m == nil {
			t.Error("no CSRF token on the sign-in form")
			return 0
		}
		resp, err = c.PostForm(srv.URL+"/admin/sign-in", url.Values{"email": {email}, "password": {pass}, "csrf": {string(m[1])}})
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	const guesses = 40
	var mu sync.Mutex
	var wg sync.WaitGroup
	statuses := map[int]int{}
	start := make(chan struct{})
	for i := range guesses {
		wg.Go(func() {
			<-start
			st := signIn(fmt.Sprintf("guess-%d-%s@example.com", i, unique()), "wrong password")
			mu.Lock()
			statuses[st]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if statuses[http.StatusUnauthorized] > 6 || statuses[http.StatusUnauthorized]+statuses[http.StatusTooManyRequests] != guesses {
		t.Errorf("%d concurrent wrong passwords from one address answered %v, want at most 6 401s and the rest 429", guesses, statuses)
	}
	var checked int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FROM dashboard_sign_in_attempt WHERE address = $1 AND outcome = 'failed'`, address).Scan(&checked); err != nil {
		t.Fatal(err)
	}
	if checked > 6 || checked == 0 {
		t.Errorf("%d failed password checks recorded for the address, want 1-6", checked)
	}
	if st := signIn(f.users[voucher.RoleAdmin], password); st != http.StatusTooManyRequests {
		t.Errorf("a right password from the locked address: %d, want 429", st)
	}
	if _, err := f.accounts.LiftLocks(context.Background(), "", address); err != nil {
		t.Fatal(err)
	}
	if st := signIn(f.users[voucher.RoleAdmin], password); st != http.StatusSeeOther {
		t.Errorf("a right password once the address is unlocked: %d, want 303", st)
	}
}
