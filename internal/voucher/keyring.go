package voucher

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RateLimiter shares a key's rate over every server (GCRA in Redis).
type RateLimiter interface {
	// Allow counts one request under key; over ratePerSecond (plus burst)
	// it returns how long until one more is allowed, else 0.
	Allow(ctx context.Context, key string, ratePerSecond, burst int) (retryAfter time.Duration, err error)
}

// KeyRingConfig tunes a KeyRing.
type KeyRingConfig struct {
	// TTL is how old the keys held may grow before they are read again:
	// the backstop when a change's message is lost; default 5s.
	TTL time.Duration
	// MissInterval is how often at most a key that is not held makes the
	// ring read the keys again (a key made on another server a moment
	// ago); default 250ms, so unknown keys cost the database at most four
	// reads a second, however many arrive.
	MissInterval time.Duration
	Logger       *slog.Logger
}

// KeyRing holds, on each server, every key neither revoked nor expired,
// so a request's key is checked without a database query. It reads them
// again when told of a change (Changed: Redis pub/sub), every TTL, and,
// at most every MissInterval, for a key it does not hold.
type KeyRing struct {
	store   ApiKeyStore
	limiter RateLimiter
	cfg     KeyRingConfig

	keys atomic.Pointer[map[[sha256.Size]byte]*ringKey]
	// changes counts the changes told: one told while the keys were read
	// may not be in what was read. loadStarts numbers the reads, heldStart
	// is the number of the read held (under storeMu).
	changes    atomic.Uint64
	loadStarts atomic.Uint64
	heldStart  uint64
	kick       chan struct{}
	touches    chan int64
	storeMu    sync.Mutex
	missMu     sync.Mutex
	// lastMiss is when a miss last read the keys, nextRead the read the
	// misses wait for (under missMu).
	lastMiss time.Time
	nextRead *missRead
	// limiterWarned is when a limiter fault was last logged (unix ns).
	limiterWarned atomic.Int64
}

type ringKey struct {
	key       ApiKey
	digest    [sha256.Size]byte
	rateKey   string
	caller    Caller        // made once: a request allocates nothing for it
	touchedAt *atomic.Int64 // unix ns of the last lastUsedAt write asked for
}

// NewKeyRing returns a ring over the store; limiter may be nil when no
// key has a rate (a key with one is then not limited).
func NewKeyRing(store ApiKeyStore, limiter RateLimiter, cfg KeyRingConfig) *KeyRing {
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Second
	}
	if cfg.MissInterval <= 0 {
		cfg.MissInterval = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &KeyRing{store: store, limiter: limiter, cfg: cfg, kick: make(chan struct{}, 1), touches: make(chan int64, 256)}
	empty := map[[sha256.Size]byte]*ringKey{}
	r.keys.Store(&empty)
	return r
}

// KeyCheck is a bearer token found among the keys.
type KeyCheck struct {
	Caller Caller
	// RetryAfter is set when the request is over the key's rate: it is
	// refused with RATE_LIMITED.
	RetryAfter time.Duration
	// Unknowable is set (with ok false) for a key the ring does not hold
	// when the keys could not be read: a key made a moment ago may be
	// among them, so the request is refused UNAVAILABLE (retry), not 401.
	Unknowable bool
}

// Check looks a bearer token up among the keys: ok is false for anything
// but a key neither revoked nor expired. It reads no database (but for a
// key it does not hold, at most every MissInterval) and asks Redis only
// for a key with a rate.
func (r *KeyRing) Check(ctx context.Context, token string) (KeyCheck, bool) {
	if !strings.HasPrefix(token, ApiKeyPrefix) {
		return KeyCheck{}, false
	}
	digest := sha256.Sum256([]byte(token))
	k := r.find(digest)
	if k == nil {
		if !r.reloadForMiss(ctx) {
			return KeyCheck{Unknowable: true}, false
		}
		if k = r.find(digest); k == nil {
			return KeyCheck{}, false
		}
	}
	now := clockNow()
	if k.key.ExpiredAt(now) {
		return KeyCheck{}, false
	}
	r.touch(k, now)
	c := KeyCheck{Caller: k.caller}
	if k.key.RatePerSecond != nil && r.limiter != nil {
		rate := *k.key.RatePerSecond
		burst := rate
		if k.key.Burst != nil {
			burst = *k.key.Burst
		}
		wait, err := r.limiter.Allow(ctx, k.rateKey, rate, burst)
		if err != nil {
			// Redis not answering lets the request through: a limit is
			// not worth refusing every caller of the key for.
			r.warnLimiter(ctx, err)
		}
		c.RetryAfter = wait
	}
	return c, true
}

// find returns the key of a digest. The map finds it by the digest; the
// digests are then compared in constant time, as the listed tokens are.
func (r *KeyRing) find(digest [sha256.Size]byte) *ringKey {
	k := (*r.keys.Load())[digest]
	if k == nil || subtle.ConstantTimeCompare(k.digest[:], digest[:]) != 1 {
		return nil
	}
	return k
}

// reloadForMiss reads the keys again for a key the ring does not hold and
// says whether the read succeeded. Misses share reads: a miss waits for the
// first read that starts after it arrived, and reads start at most every
// MissInterval, so a key made a moment ago on another server is found
// however soon it is used, and a flood of unknown keys costs the database
// no more than four reads a second.
func (r *KeyRing) reloadForMiss(ctx context.Context) bool {
	r.missMu.Lock()
	read := r.nextRead
	if read == nil {
		read = &missRead{done: make(chan struct{})}
		r.nextRead = read
		// Shared by every miss until it starts: not cancelled with the
		// request that happened to start it.
		go r.missRead(context.WithoutCancel(ctx), read)
	}
	r.missMu.Unlock()
	select {
	case <-read.done:
		return read.ok
	case <-ctx.Done():
		return false
	}
}

// missRead is one read of the keys that misses wait for.
type missRead struct {
	done chan struct{}
	ok   bool
}

func (r *KeyRing) missRead(ctx context.Context, read *missRead) {
	r.missMu.Lock()
	wait := r.cfg.MissInterval - time.Since(r.lastMiss)
	r.missMu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	r.missMu.Lock()
	// Misses from now on wait for the next read: this one may have
	// started before their key was made.
	r.nextRead = nil
	r.lastMiss = time.Now()
	r.missMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := r.load(ctx)
	if err != nil {
		r.cfg.Logger.WarnContext(ctx, "could not read the API keys", "err", err)
	}
	read.ok = err == nil
	close(read.done)
}

// touch asks the ring's loop to write the key's lastUsedAt, at most once a
// minute per key on this server (the store also skips a write within a
// minute of another server's).
func (r *KeyRing) touch(k *ringKey, now time.Time) {
	last := k.touchedAt.Load()
	if now.UnixNano()-last < int64(time.Minute) || !k.touchedAt.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	select {
	case r.touches <- k.key.ID:
	default: // the loop is behind: the next minute's use writes it
		k.touchedAt.Store(last)
	}
}

func (r *KeyRing) warnLimiter(ctx context.Context, err error) {
	now := time.Now().UnixNano()
	last := r.limiterWarned.Load()
	if now-last > int64(10*time.Second) && r.limiterWarned.CompareAndSwap(last, now) {
		r.cfg.Logger.WarnContext(ctx, "the rate limiter did not answer; requests of keys with a rate pass unlimited", "err", err)
	}
}

// Changed is told of a key created or revoked on any server (and of the
// subscription's start, when messages may have been missed): the ring reads
// the keys again at once.
func (r *KeyRing) Changed() {
	r.changes.Add(1)
	r.kickLoad()
}

func (r *KeyRing) kickLoad() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// load reads the usable keys and holds them unless a read that started
// later is held already (reads overlap: the loop's and the misses'). A
// change told while it read may not be in what it read: the loop reads
// again.
func (r *KeyRing) load(ctx context.Context) error {
	start := r.loadStarts.Add(1)
	seq := r.changes.Load()
	keys, err := r.store.UsableApiKeys(ctx)
	if err != nil {
		return err
	}
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	if r.changes.Load() != seq {
		r.kickLoad()
	}
	if start < r.heldStart {
		return nil
	}
	r.heldStart = start
	old := *r.keys.Load()
	byID := make(map[int64]*ringKey, len(old))
	for _, k := range old {
		byID[k.key.ID] = k
	}
	m := make(map[[sha256.Size]byte]*ringKey, len(keys))
	for _, k := range keys {
		if len(k.Hash) != sha256.Size {
			continue
		}
		rk := &ringKey{key: k, touchedAt: new(atomic.Int64), caller: Caller{Role: k.Role, Name: "key:" + k.Name}}
		copy(rk.digest[:], k.Hash)
		// A key's rate is counted under its hash, not its id: ids repeat
		// across databases that share a Redis.
		rk.rateKey = "apikey:" + hex.EncodeToString(k.Hash[:12])
		if prev := byID[k.ID]; prev != nil {
			rk.touchedAt = prev.touchedAt
		}
		m[rk.digest] = rk
	}
	r.keys.Store(&m)
	return nil
}

// Start reads the keys once (a failure is logged: the listed tokens still
// work, and the loop tries again) and runs the ring's loop until ctx ends:
// reads on a change and every TTL, and lastUsedAt writes. The returned
// function waits for the loop to stop.
func (r *KeyRing) Start(ctx context.Context) (wait func()) {
	if err := r.load(ctx); err != nil {
		r.cfg.Logger.WarnContext(ctx, "could not read the API keys; retrying", "err", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx)
	}()
	return func() { <-done }
}

func (r *KeyRing) run(ctx context.Context) {
	tick := time.NewTicker(r.cfg.TTL)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-tick.C:
		case id := <-r.touches:
			if err := r.store.TouchApiKey(ctx, id); err != nil && ctx.Err() == nil {
				r.cfg.Logger.WarnContext(ctx, "could not record an API key's use", "key", id, "err", err)
			}
			continue
		}
		if err := r.load(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.WarnContext(ctx, "could not read the API keys", "err", err)
		}
	}
}
