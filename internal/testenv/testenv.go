// Package testenv is the test kit's settings and waits: where the tests find
// the shared PostgreSQL and Redis (TEST_DATABASE_URL, TEST_REDIS_URL, as
// `make test` sets them, with the same defaults as the Makefile), and
// Eventually, a poll with a deadline in place of a fixed sleep.
package testenv

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The defaults of TEST_DATABASE_URL and TEST_REDIS_URL: the local services
// that scripts/setup.sh makes.
const (
	DefaultDatabaseURL = "postgres://voucher@127.0.0.1:5432/voucher_test?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// EnvOr is the environment variable name, or def when it is unset or empty.
func EnvOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// DatabaseURL is the test database: TEST_DATABASE_URL, or
// DefaultDatabaseURL.
func DatabaseURL() string { return EnvOr("TEST_DATABASE_URL", DefaultDatabaseURL) }

// RedisURL is the test Redis: TEST_REDIS_URL, or DefaultRedisURL.
func RedisURL() string { return EnvOr("TEST_REDIS_URL", DefaultRedisURL) }

// WithQuery is url with query ("pool_max_conns=2") added to its query
// string, whether or not it has one.
func WithQuery(url, query string) string {
	if strings.Contains(url, "?") {
		return url + "&" + query
	}
	return url + "?" + query
}

// Pool is the pgxpool settings of a test's server or pool of at most n
// connections, for WithQuery: the tests' servers and pools share the test
// PostgreSQL's 100 connections, and most of them are idle most of the
// time, so an idle connection is closed after 2 s (checked each second)
// rather than held until the test ends (make test beside a CPU hog held 87
// at its peak when they were).
func Pool(n int) string {
	return "pool_max_conns=" + strconv.Itoa(n) + "&pool_max_conn_idle_time=2s&pool_health_check_period=1s"
}

// Bounds of Eventually.
const (
	// EventuallyTimeout is how long Eventually polls before it fails the test.
	EventuallyTimeout = 30 * time.Second
	// EventuallyInterval is the pause between two polls.
	EventuallyInterval = 20 * time.Millisecond
)

// Eventually polls cond until it reports true, and fails the test when it
// has not within EventuallyTimeout, saying what was awaited and cond's last
// account of why not (its string).
func Eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	EventuallyWithin(t, EventuallyTimeout, what, cond)
}

// EventuallyWithin is Eventually with a deadline of its own.
func EventuallyWithin(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, timeout, why)
			return // for a testing.TB whose Fatalf does not stop the goroutine
		}
		time.Sleep(EventuallyInterval)
	}
}

// SkipShort skips the test under `go test -short` (make check), for the
// harnesses that start a browser or an OS process: make test runs them.
func SkipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a spawned process; make test runs it")
	}
}

// Generated runs a campaign's code generation to its end, whoever runs it.
// generate is a Service's GenerateCampaign of the campaign; ready says
// whether the campaign is READY. Every voucherd of another test on the
// same database scans for campaigns still GENERATING and may take one's
// lease first, and GenerateCampaign then leaves the codes to that holder
// and returns at once (stop 42's CI failed on it); so this waits for
// READY, and generates again while it waits, should that holder stop.
func Generated(t testing.TB, generate func() error, ready func() (bool, error)) {
	t.Helper()
	if err := generate(); err != nil {
		t.Fatalf("generating a campaign's codes: %v", err)
	}
	EventuallyWithin(t, time.Minute, "the campaign READY", func() (bool, string) {
		ok, err := ready()
		if err != nil {
			return false, err.Error()
		}
		if !ok {
			if err := generate(); err != nil {
				return false, err.Error()
			}
		}
		return ok, "still GENERATING"
	})
}
