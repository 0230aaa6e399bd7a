package clientaddr_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"voucherd/internal/clientaddr"
)

func TestParseTrusted_TakesCIDRsAndRefusesAnythingElse(t *testing.T) {
	t.Parallel()
	for _, good := range []string{"", " ", "10.0.0.0/8", "10.0.0.0/8, 192.168.1.7/32 ,2001:db8::/32", "10.1.2.3/8", "::ffff:10.0.0.0/104,"} {
		if _, err := clientaddr.ParseTrusted(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"10.0.0.1", "10.0.0.0/33", "proxy.internal", "10.0.0.0/8;192.168.0.0/16", "10.0.0.0/8,fe80::/", "*"} {
		_, err := clientaddr.ParseTrusted(bad)
		if err == nil || !strings.Contains(err.Error(), "is not a CIDR") {
			t.Errorf("%q: %v, want a refusal", bad, err)
		}
	}
}

func TestResolver_TheClientIsTheRightMostUntrustedAddress(t *testing.T) {
	t.Parallel()
	r, err := clientaddr.ParseTrusted("10.0.0.0/8, fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc, peer string
		xff        []string
		want       string
	}{
		{"a direct client", "203.0.113.7:5000", nil, "203.0.113.7"},
		{"a direct client's own header is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, "203.0.113.7"},
		{"behind a proxy", "10.0.0.2:443", []string{"203.0.113.7"}, "203.0.113.7"},
		{"a made-up hop left of the real one", "10.0.0.2:443", []string{"198.51.100.1, 203.0.113.7"}, "203.0.113.7"},
		{"two trusted proxies", "10.0.0.2:443", []string{"203.0.113.7, 10.0.0.9"}, "203.0.113.7"},
		{"several headers are one list", "10.0.0.2:443", []string{"198.51.100.1", "203.0.113.7, 10.0.0.9"}, "203.0.113.7"},
		{"a proxy without a header", "10.0.0.2:443", nil, "10.0.0.2"},
		{"every hop trusted: the furthest", "10.0.0.2:443", []string{"10.0.0.5, 10.0.0.9"}, "10.0.0.5"},
		{"garbage where the client should be: the last trusted hop", "10.0.0.2:443", []string{"198.51.100.1, not-an-ip, 10.0.0.9"}, "10.0.0.9"},
		{"an empty entry stops as garbage does", "10.0.0.2:443", []string{"203.0.113.7,"}, "10.0.0.2"},
		{"a hop with a port", "10.0.0.2:443", []string{"203.0.113.7:41234"}, "203.0.113.7"},
		{"an IPv6 hop with a port", "10.0.0.2:443", []string{"[2001:db8::7]:41234"}, "2001:db8::7"},
		{"an IPv6 proxy", "[fd00::1]:443", []string{"2001:db8::7"}, "2001:db8::7"},
		{"an IPv4-mapped proxy", "[::ffff:10.0.0.2]:443", []string{"203.0.113.7"}, "203.0.113.7"},
		{"an IPv4-mapped client", "[::ffff:203.0.113.7]:5000", nil, "203.0.113.7"},
		{"a zone is dropped", "[fe80::1%eth0]:5000", nil, "fe80::1"},
		{"a peer that is no IP (tests) as it is", "198.51.100.abc:4711", []string{"203.0.113.7"}, "198.51.100.abc"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = tc.peer
		for _, v := range tc.xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		if got := r.Address(req); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.desc, got, tc.want)
		}
	}
	// No proxy trusted (the default): always the peer.
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.2:443"
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	if got := (clientaddr.Resolver{}).Address(req); got != "10.0.0.2" {
		t.Errorf("no trusted proxies: %s, want the peer", got)
	}
}

// TestMiddleware_OfAndTheLogsNameTheClient: behind Middleware, Of is the
// resolved address and every record logged with the request's context
// says client=...; without it, Of is the peer.
func TestMiddleware_OfAndTheLogsNameTheClient(t *testing.T) {
	t.Parallel()
	r, _ := clientaddr.ParseTrusted("10.0.0.0/8")
	var logs bytes.Buffer
	logger := slog.New(clientaddr.LogHandler(slog.NewTextHandler(&logs, nil))).With("component", "test")
	var seen string
	h := r.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		seen = clientaddr.Of(req)
		logger.InfoContext(req.Context(), "handled")
		logger.Info("no context")
	}))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.2:443"
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if seen != "203.0.113.7" {
		t.Errorf("Of = %s, want the forwarded client", seen)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "client=203.0.113.7") || !strings.Contains(lines[0], "component=test") || strings.Contains(lines[1], "client=") {
		t.Errorf("logs = %q, want client=203.0.113.7 on the record with the request's context only", logs.String())
	}
	// An outer Middleware's answer stands (the server's, then the dashboard's).
	inner := (clientaddr.Resolver{}).Middleware(h)
	inner = r.Middleware(inner)
	seen = ""
	inner.ServeHTTP(httptest.NewRecorder(), req)
	if seen != "203.0.113.7" {
		t.Errorf("nested: Of = %s, want the outer resolver's", seen)
	}
	bare := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(context.Background())
	bare.RemoteAddr = "10.0.0.2:443"
	bare.Header.Set("X-Forwarded-For", "203.0.113.7")
	if got := clientaddr.Of(bare); got != "10.0.0.2" {
		t.Errorf("Of without Middleware = %s, want the peer", got)
	}
}

// TestConnContext_AnUntrustedPeerIsFoundOncePerConnection: behind
// http.Server's ConnContext, a peer that is no trusted proxy is the client
// of its requests whatever X-Forwarded-For says; a trusted proxy's requests
// are still resolved one by one from the header.
func TestConnContext_AnUntrustedPeerIsFoundOncePerConnection(t *testing.T) {
	for _, tc := range []struct {
		trusted, forwardedFor, want string
	}{
		{"", "203.0.113.7", "127.0.0.1"},
		{"10.0.0.0/8", "203.0.113.7", "127.0.0.1"},
		{"127.0.0.0/8", "203.0.113.7", "203.0.113.7"},
		{"127.0.0.0/8", "", "127.0.0.1"},
	} {
		r, err := clientaddr.ParseTrusted(tc.trusted)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(r.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("X-Client", clientaddr.Of(req))
		})))
		srv.Config.ConnContext = r.ConnContext
		srv.Start()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.forwardedFor != "" {
			req.Header.Set("X-Forwarded-For", tc.forwardedFor)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Header.Get("X-Client")
		_ = resp.Body.Close()
		srv.Close()
		if got != tc.want {
			t.Errorf("trusted %q, X-Forwarded-For %q: client %q, want %q", tc.trusted, tc.forwardedFor, got, tc.want)
		}
	}
}
