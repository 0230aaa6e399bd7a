package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"voucherd/internal/voucher"
)

// verify is the contract's verifier, from its text: t=<unix seconds>,
// v1=<hex HMAC-SHA256 of "<t>.<body>" under the secret>, any v1 may match.
func verify(header string, body []byte, secret string) bool {
	var t string
	var sigs []string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			t = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

func TestSign_IsTheContractsHMACOfTimestampDotBodyPerSecret(t *testing.T) {
	at := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	h := Sign(at, body, "whsec_new", "whsec_old")
	if !strings.HasPrefix(h, "t=1700000000,v1=") || strings.Count(h, "v1=") != 2 {
		t.Fatalf("header %q", h)
	}
	for _, c := range []struct {
		desc   string
		body   []byte
		secret string
		want   bool
	}{
		{"the new secret", body, "whsec_new", true},
		{"the old secret", body, "whsec_old", true},
		{"another secret", body, "whsec_other", false},
		{"a changed body", []byte(`{"id":"evt_2"}`), "whsec_new", false},
	} {
		if got := verify(h, c.body, c.secret); got != c.want {
			t.Errorf("%s: verified %t, want %t", c.desc, got, c.want)
		}
	}
	if one := Sign(at, body, "whsec_new"); strings.Count(one, "v1=") != 1 || verify(one, body, "whsec_old") {
		t.Errorf("one secret: %q", one)
	}
}

func TestGuard_CheckURLRefusesSchemesAndInternalAddresses(t *testing.T) {
	public := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	internal := func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.7")}, nil
	}
	for _, c := range []struct {
		desc   string
		url    string
		lookup func(context.Context, string) ([]netip.Addr, error)
		allow  bool
		ok     bool
	}{
		{"https on a public name", "https://hooks.example.com/x", public, false, true},
		{"http on a public address", "http://93.184.216.34:8080/x", nil, false, true},
		{"ftp", "ftp://hooks.example.com/x", public, false, false},
		{"no host", "http:///x", public, false, false},
		{"user information", "https://user:pw@hooks.example.com/x", public, false, false},
		{"loopback", "http://127.0.0.1/x", nil, false, false},
		{"IPv6 loopback", "http://[::1]/x", nil, false, false},
		{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]/x", nil, false, false},
		{"private", "http://192.168.1.1/x", nil, false, false},
		{"link-local (cloud metadata)", "http://169.254.169.254/x", nil, false, false},
		{"a name with one internal address", "https://hooks.example.com/x", internal, false, false},
		{"internal, allowed", "http://127.0.0.1/x", nil, true, true},
		{"ftp, allowed private", "ftp://127.0.0.1/x", nil, true, false},
	} {
		err := Guard{AllowPrivate: c.allow, Lookup: c.lookup}.CheckURL(context.Background(), c.url)
		if (err == nil) != c.ok {
			t.Errorf("%s (%s): %v, want ok=%t", c.desc, c.url, err, c.ok)
		}
		if err != nil && voucher.ErrorCodeOf(err) != voucher.InvalidInput {
			t.Errorf("%s: %v, want INVALID_INPUT", c.desc, err)
		}
	}
}

// A name that resolved to a public address when the endpoint was
// registered and resolves to loopback at delivery (DNS rebinding) is
// refused at the dial: the delivery never reaches the internal address.
func TestClient_ADeliveryToANameRebindingToAnInternalAddressIsRefusedAtTheDial(t *testing.T) {
	var hits atomic.Int64
	internal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer internal.Close()
	port := internal.URL[strings.LastIndex(internal.URL, ":")+1:]

	var lookups atomic.Int64
	rebinding := func(context.Context, string) ([]netip.Addr, error) {
		if lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil // at registration
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil // at delivery
	}
	g := Guard{Lookup: rebinding}
	url := "http://hooks.example.com:" + port + "/x"
	if err := g.CheckURL(context.Background(), url); err != nil {
		t.Fatalf("registration: %v", err)
	}
	resp, err := NewClient(g, 2*time.Second).Post(url, "application/json", strings.NewReader("{}"))
	if err == nil {
		_ = resp.Body.Close()
	}
	if err == nil || !errors.Is(err, errRefusedAddress) {
		t.Errorf("delivery after rebinding: %v, want the address refused", err)
	}
	if hits.Load() != 0 {
		t.Errorf("the internal server got %d requests", hits.Load())
	}
	// The same with private addresses allowed reaches it.
	allowed := Guard{AllowPrivate: true, Lookup: rebinding}
	resp, err = NewClient(allowed, 2*time.Second).Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if hits.Load() != 1 {
		t.Errorf("allowed: %d requests", hits.Load())
	}
}

// The dialer's Control refuses an internal address whatever resolved it.
func TestGuard_ControlRefusesInternalAddressesAtTheSocket(t *testing.T) {
	g := Guard{}
	for addr, ok := range map[string]bool{"127.0.0.1:80": false, "[::1]:443": false, "10.1.1.1:80": false, "93.184.216.34:443": true} {
		if err := g.control("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("%s: %v, want ok=%t", addr, err, ok)
		}
	}
}

func TestWorker_BackoffRetriesFirstWithinAMinuteAndDoublesToTheCap(t *testing.T) {
	w := NewWorker(Config{})
	var total time.Duration
	for n := 1; n <= 40; n++ {
		d := w.Backoff(n)
		if n == 1 && (d > time.Minute || d < 27*time.Second) {
			t.Errorf("first retry after %s, want 27-30 s", d)
		}
		if d > time.Hour {
			t.Errorf("retry %d after %s, past the hour's cap", n, d)
		}
		total += d
	}
	// 40 attempts span more than the 24 h window: the retries last it.
	if total < 24*time.Hour {
		t.Errorf("40 attempts span %s, want more than 24 h", total)
	}
}
