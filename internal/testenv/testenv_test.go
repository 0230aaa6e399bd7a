package testenv_test

import (
	"fmt"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

func TestEnvOr_AnUnsetOrEmptyVariableGivesTheDefault(t *testing.T) {
	t.Setenv("TESTENV_SOME_VAR", "")
	if got := testenv.EnvOr("TESTENV_SOME_VAR", "def"); got != "def" {
		t.Errorf("empty: EnvOr = %q, want def", got)
	}
	t.Setenv("TESTENV_SOME_VAR", "set")
	if got := testenv.EnvOr("TESTENV_SOME_VAR", "def"); got != "set" {
		t.Errorf("set: EnvOr = %q, want set", got)
	}
}

func TestURLs_ComeFromTheEnvironmentWithTheMakefilesDefaults(t *testing.T) {
	t.Setenv("TEST_DATABASE_URL", "")
	t.Setenv("TEST_REDIS_URL", "")
	if got := testenv.DatabaseURL(); got != "postgres://voucher@127.0.0.1:5432/voucher_test?sslmode=disable" {
		t.Errorf("DatabaseURL = %q", got)
	}
	if got := testenv.RedisURL(); got != "redis://127.0.0.1:6379/0" {
		t.Errorf("RedisURL = %q", got)
	}
	t.Setenv("TEST_DATABASE_URL", "postgres://elsewhere/db")
	t.Setenv("TEST_REDIS_URL", "redis://elsewhere/1")
	if testenv.DatabaseURL() != "postgres://elsewhere/db" || testenv.RedisURL() != "redis://elsewhere/1" {
		t.Errorf("URLs = %q, %q; want the environment's", testenv.DatabaseURL(), testenv.RedisURL())
	}
}

func TestEventually_ReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	testenv.Eventually(t, "the third poll", func() (bool, string) {
		n++
		return n == 3, fmt.Sprintf("poll %d", n)
	})
	if n != 3 {
		t.Errorf("polled %d times, want 3", n)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}
func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

func TestEventually_FailsAtTheDeadlineSayingWhatAndWhyNot(t *testing.T) {
	r := &fatalRecorder{TB: t}
	start := time.Now()
	testenv.EventuallyWithin(r, 100*time.Millisecond, "the queue to drain", func() (bool, string) {
		return false, "3 left"
	})
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("gave up after %s, before the deadline", time.Since(start))
	}
	if want := "the queue to drain: not within 100ms: 3 left"; r.msg != want {
		t.Errorf("Fatalf(%q), want %q", r.msg, want)
	}
}

func TestWithQuery_AddsToAQueryStringOrStartsOne(t *testing.T) {
	if got := testenv.WithQuery("postgres://h/db?sslmode=disable", "pool_max_conns=2"); got != "postgres://h/db?sslmode=disable&pool_max_conns=2" {
		t.Errorf("with a query: %s", got)
	}
	if got := testenv.WithQuery("redis://h:6379/0", "read_timeout=3s"); got != "redis://h:6379/0?read_timeout=3s" {
		t.Errorf("without one: %s", got)
	}
}
