package shed

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the adaptation tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func withClock(l *Limiter) *fakeClock {
	c := &fakeClock{t: time.Unix(1_000_000, 0)}
	l.now = c.now
	l.winStart = c.now()
	return c
}

func waiters(l *Limiter) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiters)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestShed_UnderTheLimitNothingIsRefused(t *testing.T) {
	l := New(Config{Max: 4, Target: time.Hour})
	var releases []func()
	for i := range 4 {
		release, ok := l.Acquire(context.Background())
		if !ok {
			t.Fatalf("request %d of 4 refused under a limit of 4", i+1)
		}
		releases = append(releases, release)
	}
	if _, ok := l.Acquire(context.Background()); ok {
		t.Fatal("a fifth request was admitted over a limit of 4 with no wait")
	}
	releases[0]()
	releases[0]() // a second call frees nothing more
	if got := l.InFlight(); got != 3 {
		t.Fatalf("in flight after a release (called twice): %d, want 3", got)
	}
	release, ok := l.Acquire(context.Background())
	if !ok {
		t.Fatal("a request was refused with a place free")
	}
	release()
	for _, r := range releases[1:] {
		r()
	}
	if got := l.InFlight(); got != 0 {
		t.Fatalf("in flight at the end: %d", got)
	}
}

func TestShed_AFreedPlaceGoesToTheNewestWaiter(t *testing.T) {
	l := New(Config{Max: 2, Target: time.Hour, MaxWait: time.Hour})
	first, ok := l.Acquire(context.Background())
	second, ok2 := l.Acquire(context.Background())
	if !ok || !ok2 {
		t.Fatal("the first two requests were refused")
	}
	type result struct {
		name    string
		release func()
		ok      bool
	}
	results := make(chan result, 2)
	wait := func(name string) {
		release, ok := l.Acquire(context.Background())
		results <- result{name, release, ok}
	}
	go wait("older")
	waitFor(t, "the older request waits", func() bool { return waiters(l) == 1 })
	go wait("newer")
	waitFor(t, "the newer request waits", func() bool { return waiters(l) == 2 })

	first()
	got := <-results
	if got.name != "newer" || !got.ok {
		t.Fatalf("the freed place went to %s (ok %v), want the newer waiter", got.name, got.ok)
	}
	second()
	got2 := <-results
	if got2.name != "older" || !got2.ok {
		t.Fatalf("then to %s (ok %v), want the older waiter", got2.name, got2.ok)
	}
	got.release()
	got2.release()
	if l.InFlight() != 0 || waiters(l) != 0 {
		t.Fatalf("in flight %d, waiting %d at the end", l.InFlight(), waiters(l))
	}
}

func TestShed_AWaiterIsRefusedAfterMaxWaitOrWhenItsContextEnds(t *testing.T) {
	l := New(Config{Max: 1, Target: time.Hour, MaxWait: 5 * time.Millisecond})
	held, ok := l.Acquire(context.Background())
	if !ok {
		t.Fatal("the first request was refused")
	}
	if _, ok := l.Acquire(context.Background()); ok {
		t.Fatal("a request was admitted while the only place was held past MaxWait")
	}

	l.cfg.MaxWait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	refused := make(chan bool)
	go func() {
		_, ok := l.Acquire(ctx)
		refused <- !ok
	}()
	waitFor(t, "the request waits", func() bool { return waiters(l) == 1 })
	cancel()
	if !<-refused {
		t.Fatal("a waiter whose context ended was admitted")
	}
	if waiters(l) != 0 {
		t.Fatalf("a refused waiter is still on the list (%d)", waiters(l))
	}
	held()
	if l.InFlight() != 0 {
		t.Fatalf("in flight at the end: %d", l.InFlight())
	}
}

// The wait list holds at most as many as the limit: the next is refused at
// once, without waiting.
func TestShed_AFullWaitListRefusesAtOnce(t *testing.T) {
	l := New(Config{Max: 2, Target: time.Hour, MaxWait: time.Hour})
	var releases []func()
	for range 2 {
		r, _ := l.Acquire(context.Background())
		releases = append(releases, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = l.Acquire(ctx) })
	}
	waitFor(t, "two requests wait", func() bool { return waiters(l) == 2 })
	if _, ok := l.Acquire(ctx); ok {
		t.Fatal("a request past a full wait list was admitted")
	}
	cancel()
	wg.Wait()
	for _, r := range releases {
		r()
	}
}

// serve admits n requests at once, each taking latency on the fake clock,
// and releases them.
func serve(t *testing.T, l *Limiter, c *fakeClock, n int, latency time.Duration) {
	t.Helper()
	var releases []func()
	for range n {
		r, ok := l.Acquire(context.Background())
		if !ok {
			t.Fatalf("refused with %d in flight under a limit of %d", l.InFlight(), l.Limit())
		}
		releases = append(releases, r)
	}
	c.add(latency)
	for _, r := range releases {
		r()
	}
}

func TestShed_TheLimitShrinksWhileItBindsAndServedRequestsAreLate(t *testing.T) {
	l := New(Config{Max: 100, Min: 10, Target: 10 * time.Millisecond, Window: 100 * time.Millisecond})
	c := withClock(l)
	// At the limit, 40 ms a request: four times the target.
	for range 5 {
		serve(t, l, c, l.Limit(), 40*time.Millisecond)
		c.add(100 * time.Millisecond)
	}
	if got := l.Limit(); got >= 50 {
		t.Fatalf("limit %d after five late windows at the limit, want it well under 100", got)
	}
	shrunk := l.Limit()
	// On time again at the limit: it grows back, to Max at most.
	for range 40 {
		serve(t, l, c, l.Limit(), 2*time.Millisecond)
		c.add(100 * time.Millisecond)
	}
	if got := l.Limit(); got != 100 {
		t.Fatalf("limit %d after forty punctual windows (from %d), want back at 100", got, shrunk)
	}
	// Never under Min.
	for range 40 {
		serve(t, l, c, l.Limit(), time.Second)
		c.add(100 * time.Millisecond)
	}
	if got := l.Limit(); got != 10 {
		t.Fatalf("limit %d after forty very late windows, want Min (10)", got)
	}
}

// A slow dependency at a light load is no overload: requests late by
// themselves, far fewer in service than the limit, leave the limit alone.
func TestShed_LateRequestsAtALightLoadLeaveTheLimitAlone(t *testing.T) {
	l := New(Config{Max: 100, Target: 10 * time.Millisecond})
	c := withClock(l)
	for range 50 {
		serve(t, l, c, 20, 200*time.Millisecond)
	}
	if got := l.Limit(); got != 100 {
		t.Fatalf("limit %d after slow requests 20 at a time, want 100 untouched", got)
	}
}

// However they interleave, never more in service than Max, and every
// request is either served or refused.
func TestShed_NeverMoreInServiceThanTheLimit(t *testing.T) {
	const maxInflight = 8
	l := New(Config{Max: maxInflight, Target: time.Hour, MaxWait: 200 * time.Microsecond})
	var inService, peak, served, refused atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 200 {
				release, ok := l.Acquire(context.Background())
				if !ok {
					refused.Add(1)
					continue
				}
				n := inService.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(10 * time.Microsecond)
				inService.Add(-1)
				served.Add(1)
				release()
			}
		})
	}
	wg.Wait()
	if p := peak.Load(); p > maxInflight {
		t.Fatalf("%d in service at once, over the limit of %d", p, maxInflight)
	}
	if served.Load()+refused.Load() != 64*200 || served.Load() == 0 {
		t.Fatalf("served %d + refused %d, want 12,800 with some served", served.Load(), refused.Load())
	}
	if l.InFlight() != 0 || waiters(l) != 0 {
		t.Fatalf("in flight %d, waiting %d at the end", l.InFlight(), waiters(l))
	}
}
