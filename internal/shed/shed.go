// Package shed is the server's load shedding: an adaptive limit on the
// storefront requests served at once, with a short LIFO wait for a free
// place. A request it refuses is answered at once by the caller (server:
// 503 UNAVAILABLE with Retry-After); the rest keep their usual latency.
//
// Why this shape. Past its capacity a server queues: every request waits,
// and all of them are late (the open-loop rows of docs/benchmarks.md). The
// limit bounds the requests in service, so those have the latency of a
// loaded but not overloaded server; the excess waits at most MaxWait for a
// place and is then refused. The wait absorbs the bursts of a normal load
// (nothing is refused for a burst shorter than MaxWait), and it is LIFO: under
// overload a freed place goes to the request that came last, which is still
// early enough to be worth serving, while the oldest waiters are refused.
//
// The limit adapts with additive increase and multiplicative decrease on the
// mean latency of the requests served in a window (of at least Window and
// minSamples): above Target it shrinks in proportion (Target / mean, at
// most halved a window), at or below Target it grows by a tenth, up to Max.
// It changes only while it binds, in a window whose requests in service
// reached nine tenths of the limit: a slow dependency at a lighter load (a
// database write of 30 ms, 256 clients on a hot voucher row at 190 ms) is
// no overload, and shedding then would refuse requests that concurrency in
// this server did not slow. So at a load under the limit nothing is ever
// refused, however slow its requests. It starts at Max.
//
// What it cannot do: make a refusal cheaper than net/http's read and parse
// of the request, which it runs after. Where an answer costs about that
// much (a sold-out flash voucher, answered from memory) refusing saves no
// CPU, and with thousands of connections the admitted requests wait
// behind the refused ones in Go's scheduler at every call they make; the
// open-loop rows of docs/benchmarks.md measured exactly that, which is why
// the server runs without it unless SHED_MAX_INFLIGHT is set.
package shed

import (
	"context"
	"sync"
	"time"
)

// Config is a Limiter's settings.
type Config struct {
	// Max is the most requests in service at once (the limit's ceiling).
	Max int
	// Min is the limit's floor (default Max/8, at least min(8, Max)).
	Min int
	// Target is the mean latency of served requests above which the limit
	// shrinks.
	Target time.Duration
	// MaxWait is how long a request over the limit waits for a place
	// before it is refused; 0 refuses it at once.
	MaxWait time.Duration
	// Window is the shortest time between two changes of the limit
	// (default 100ms).
	Window time.Duration
}

// minSamples is the fewest served requests a window needs to move the
// limit: a mean of a handful is noise.
const minSamples = 16

// bindShare is the share of the limit in service at once that makes a
// window one where the limit binds.
const bindShare = 0.9

// Limiter admits requests up to its limit. It is safe for concurrent use.
type Limiter struct {
	cfg Config
	now func() time.Time

	mu       sync.Mutex
	limit    float64
	inflight int
	waiters  []*waiter // a stack: the last one is handed the next place

	// The current window.
	winStart time.Time
	winSum   time.Duration
	winN     int
	winPeak  int
}

type waiter struct {
	ready  chan struct{} // closed when handed a place
	handed bool          // under mu
}

// New returns a Limiter; cfg.Max must be positive.
func New(cfg Config) *Limiter {
	if cfg.Max < 1 {
		panic("shed: Max must be positive")
	}
	if cfg.Min < 1 || cfg.Min > cfg.Max {
		cfg.Min = max(cfg.Max/8, min(8, cfg.Max))
	}
	if cfg.Window <= 0 {
		cfg.Window = 100 * time.Millisecond
	}
	l := &Limiter{cfg: cfg, now: time.Now, limit: float64(cfg.Max)}
	l.winStart = l.now()
	return l
}

// Limit is the current limit (for the metrics).
func (l *Limiter) Limit() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int(l.limit)
}

// InFlight is the number of requests in service.
func (l *Limiter) InFlight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight
}

// Acquire returns a release function to call when the request is done, or
// ok false: the request is to be refused (over the limit for MaxWait, the
// wait list full, or ctx done while waiting).
func (l *Limiter) Acquire(ctx context.Context) (release func(), ok bool) {
	l.mu.Lock()
	if l.inflight < int(l.limit) && len(l.waiters) == 0 {
		l.inflight++
		l.winPeak = max(l.winPeak, l.inflight)
		l.mu.Unlock()
		return l.releaser(l.now()), true
	}
	// As many may wait as may be served: past that the wait could not end
	// within MaxWait anyway (a place frees about every latency / limit).
	if l.cfg.MaxWait <= 0 || len(l.waiters) >= int(l.limit) {
		l.mu.Unlock()
		return nil, false
	}
	w := &waiter{ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.mu.Unlock()

	t := time.NewTimer(l.cfg.MaxWait)
	defer t.Stop()
	select {
	case <-w.ready:
		return l.releaser(l.now()), true
	case <-t.C:
	case <-ctx.Done():
	}
	l.mu.Lock()
	if w.handed {
		// A place came with the timeout: give it to the next one.
		l.mu.Unlock()
		l.done(0, false)
		return nil, false
	}
	for i, x := range l.waiters {
		if x == w {
			l.waiters = append(l.waiters[:i], l.waiters[i+1:]...)
			break
		}
	}
	l.mu.Unlock()
	return nil, false
}

func (l *Limiter) releaser(start time.Time) func() {
	var once sync.Once
	return func() { once.Do(func() { l.done(l.now().Sub(start), true) }) }
}

// done frees a place (handing it to the newest waiter while the limit
// allows) and, when served, counts the request's latency.
func (l *Limiter) done(latency time.Duration, served bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	if served {
		l.observe(latency)
	}
	for len(l.waiters) > 0 && l.inflight < int(l.limit) {
		w := l.waiters[len(l.waiters)-1]
		l.waiters = l.waiters[:len(l.waiters)-1]
		w.handed = true
		l.inflight++
		l.winPeak = max(l.winPeak, l.inflight)
		close(w.ready)
	}
}

// observe adds a served request to the window and, at its end, moves the
// limit (under mu).
func (l *Limiter) observe(latency time.Duration) {
	l.winSum += latency
	l.winN++
	now := l.now()
	if l.winN < minSamples || now.Sub(l.winStart) < l.cfg.Window {
		return
	}
	mean := l.winSum / time.Duration(l.winN)
	if float64(l.winPeak) >= bindShare*l.limit {
		if mean > l.cfg.Target {
			l.limit *= max(0.5, min(0.95, float64(l.cfg.Target)/float64(mean)))
		} else {
			l.limit += max(1, l.limit/10)
		}
		l.limit = max(float64(l.cfg.Min), min(float64(l.cfg.Max), l.limit))
	}
	l.winStart, l.winSum, l.winN, l.winPeak = now, 0, 0, l.inflight
}
