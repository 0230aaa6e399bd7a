// Package gate is the Redis gate of flash vouchers: typed calls of the
// scripts in lua/, each decision one atomic script on the voucher's keys.
//
// The keys of voucher CODE, all in one Redis Cluster slot through the hash
// tag {CODE}:
//
//	voucher:{CODE}:stock      remaining uses; present means "loaded"
//	voucher:{CODE}:customers  hash customerId -> uses held (no zero counts)
//	voucher:{CODE}:orders     hash orderId -> "customerId:amount" while live,
//	                          "customerId:amount:released" once released; in
//	                          kafka mode "customerId:amount:STATE:createdAt:expiresAt"
//	                          (STATE live, confirmed, releasing, released;
//	                          Unix ms), see kafka.go
//	voucher:{CODE}:meta       hash perUserLimit, expireAt (Unix ms, 0: never),
//	                          total (the totalLimit the stock stands for, see
//	                          extend.lua)
//	voucher:{CODE}:paused     present while an operator rebuilds the gate
//
// A flash campaign has one gate, its voucher row's (CODE = ~C<id>), with
// two more hashes in the same slot:
//
//	voucher:{CODE}:codes       hash campaign code -> uses held or confirmed
//	                           (no zero counts); meta's usesPerCode bounds each
//	voucher:{CODE}:ordercodes  hash orderId -> the code a live order holds
//
// A voucher (or campaign) with period limits has, in the same slot:
//
//	voucher:{CODE}:period:SCOPE:PERIOD:START  hash customerId -> uses held
//	                           in that period (0 for a VOUCHER limit; START
//	                           in Unix ms); expires an hour after the period
//	voucher:{CODE}:orderperiods hash orderId -> the periods a live order's use
//	                           is counted in, so a give-back finds them
//
// and every gate may have, in the same slot:
//
//	voucher:{CODE}:orderdiscounts hash orderId -> the discount an order's
//	                           use took from the budget, only when it is not
//	                           the one its amount gives (appliesTo: the
//	                           eligible items' subtotal); written by the
//	                           script that admits the order, read by every
//	                           give-back (prelude.lua's order_discount),
//	                           expiring and reloaded with the orders hash
//
// and, during a large load, voucher:{CODE}:load:TOKEN:{customers,orders}.
// The first four expire at the snapshot's ExpireAt, so a sold voucher does
// not stay in Redis for good; a pause and staged chunks lapse sooner.
package gate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/coalesce"
	"voucherd/internal/voucher"
	"voucherd/lua"
)

var _ voucher.Gate = (*Gate)(nil)

// The scripts, run with EVALSHA and sent again with EVAL after a NOSCRIPT
// (a restarted or flushed Redis), as redis.Script.Run does.
var (
	reserveScript = redis.NewScript(lua.Reserve)
	releaseScript = redis.NewScript(lua.Release)
	// availabilityScript is a check's read (checkVoucher).
	availabilityScript = redis.NewScript(lua.Availability)
	stageScript        = redis.NewScript(lua.Stage)
	loadScript         = redis.NewScript(lua.Load)
	markerScript       = redis.NewScript(lua.Marker)
	lowerScript        = redis.NewScript(lua.Lower)
	extendScript       = redis.NewScript(lua.Extend)
)

const (
	// chunkSize bounds the customers and orders sent in one script call, so
	// a large snapshot neither builds one huge command nor blocks Redis for
	// long; a snapshot of up to chunkSize entries loads in one call.
	chunkSize = 2000
	// stagingTTL is how long the chunks of an unfinished load may linger.
	stagingTTL = time.Minute
	// pauseTTL bounds a pause whose rebuild never calls Replace; a rebuild
	// takes seconds (its grace period and one database snapshot).
	pauseTTL = 10 * time.Minute
)

// Gate is the Redis gate of flash vouchers over a single Redis or a Redis
// Cluster; it is safe for concurrent use.
type Gate struct {
	rdb redis.UniversalClient
	// hot runs the scripts every flash request runs (reserve and the order
	// claim): the client's auto-pipeliner when it has one and it is on, else
	// rdb. The rest (loads, snapshots, pauses, ...) run on rdb.
	hot redis.Scripter
	// cluster: the keys of one script must share a slot, so the orderId's
	// claim (another slot) takes a call of its own.
	cluster bool
	// reservers batch each voucher's reserve.lua calls; admitters and
	// finalizers each voucher's kafka-mode reserves and the finalizes of its
	// admissions (kafka.go).
	reservers  *coalesce.PerKey[*pendingReserve]
	admitters  *coalesce.PerKey[*pendingAdmit]
	finalizers *coalesce.PerKey[*pendingSettle]
}

// Option changes how New builds the gate.
type Option func(*config)

type config struct{ autoPipeline bool }

// WithAutoPipeline turns auto-pipelining of the hot scripts on (the default)
// or off. On, concurrent reserves and claims are coalesced into pipelines by
// go-redis's AutoPipeliner (an EXPERIMENTAL go-redis API), one round trip and
// one write for many requests; each script still runs atomically and answers
// its own caller, and NOSCRIPT still falls back to EVAL. A batch lost with
// its connection is sent again like a lone script (the scripts are
// idempotent by orderId). Once queued, a script runs even if the caller's
// context ends; the client's read and write timeouts bound it. The
// pipeliner belongs to the client, which closes it on Close.
func WithAutoPipeline(on bool) Option { return func(c *config) { c.autoPipeline = on } }

// New returns the gate over a client from NewClient (or any go-redis client).
func New(rdb redis.UniversalClient, opts ...Option) *Gate {
	c := config{autoPipeline: true}
	for _, o := range opts {
		o(&c)
	}
	_, isCluster := rdb.(*redis.ClusterClient)
	g := &Gate{rdb: rdb, hot: rdb, cluster: isCluster}
	g.reservers = coalesce.NewPerKey(reserveWorkers, maxReserveBatch, g.reserveBatch)
	g.admitters = coalesce.NewPerKey(admitWorkers, maxAdmitBatch, g.admitBatch)
	g.finalizers = coalesce.NewPerKey(finalizeWorkers, maxFinalizeBatch, g.finalizeBatch)
	if c.autoPipeline {
		// *redis.Client and *redis.ClusterClient have one; a client that has
		// none, or refuses (closed), leaves the scripts on the plain client.
		if ap, ok := rdb.(interface {
			AutoPipeline() (*redis.AutoPipeliner, error)
		}); ok {
			if p, err := ap.AutoPipeline(); err == nil {
				g.hot = p
			}
		}
	}
	return g
}

// AutoPipelined reports whether the hot scripts run through an auto-pipeliner.
func (g *Gate) AutoPipelined() bool {
	_, ok := g.hot.(*redis.AutoPipeliner)
	return ok
}

// keys names one voucher's keys; the hash tag puts them in one cluster slot,
// as a multi-key script requires.
type keys struct {
	prefix                                 string
	stock, customers, orders, meta, paused string
	codes, orderCodes                      string // a campaign's gate's
	markers                                string // kafka mode's rebuild markers pending (marker.lua)
	orderPeriods                           string // the periods each live order's use counts in (prelude.lua)
	orderDiscounts                         string // the discount of each order whose amount gives another (prelude.lua)
}

func keysOf(code string) keys {
	p := "voucher:{" + code + "}:"
	return keys{prefix: p, stock: p + "stock", customers: p + "customers", orders: p + "orders", meta: p + "meta", paused: p + "paused",
		codes: p + "codes", orderCodes: p + "ordercodes", markers: p + "markers", orderPeriods: p + "orderperiods",
		orderDiscounts: p + "orderdiscounts"}
}

// period names the hash of one period of a period limit.
func (k keys) period(p voucher.GatePeriod) string {
	return k.prefix + "period:" + string(p.Scope) + ":" + string(p.Period) + ":" + strconv.FormatInt(p.Start.UnixMilli(), 10)
}

// periodKeys gathers the period hashes a batch's scripts name (appended to
// keys, each once) and returns the argument each reserve passes for them
// (prelude.lua's period_plan): ” without periods.
type periodKeys struct {
	k     keys
	keys  *[]string
	index map[string]int
}

func newPeriodKeys(k keys, scriptKeys *[]string) *periodKeys {
	return &periodKeys{k: k, keys: scriptKeys, index: map[string]int{}}
}

func (pk *periodKeys) spec(r voucher.ReserveRequest) string {
	if len(r.GatePeriods) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(strconv.FormatInt(r.PeriodAt.UnixMilli(), 10))
	for _, p := range r.GatePeriods {
		name := pk.k.period(p)
		i, ok := pk.index[name]
		if !ok {
			*pk.keys = append(*pk.keys, name)
			i = len(*pk.keys) // Lua's KEYS count from 1
			pk.index[name] = i
		}
		kind := "v"
		if p.Scope == voucher.ScopeCustomer {
			kind = "c"
		}
		fmt.Fprintf(&b, ";%d,%d,%s,%d,%d,%d", p.Limit, i, kind, p.Start.UnixMilli(), p.End.UnixMilli(), p.Max)
	}
	return b.String()
}

// Reserve decides one reserve in one script: PAUSED, NOT_LOADED, DUPLICATE,
// RELEASED, ORDER_CONFLICT, ALREADY_USED, OUT_OF_STOCK, BUDGET_EXHAUSTED or
// ADMITTED (one use taken, and the discount from the budget if any).
func (g *Gate) Reserve(ctx context.Context, code string, perUserLimit int, discount int64, r voucher.ReserveRequest) (voucher.GateVerdict, error) {
	return g.reserve(ctx, code, perUserLimit, discount, r, "", "")
}

// reserve decides one reserve with reserve.lua; createdAt and expiresAt
// (Unix ms) are the Kafka path's, empty in sync mode. The reserves of one
// voucher queued at the same moment are decided by one script call, each as
// if alone and in order: a stampede's winners cost the gate one call, and
// one read of the pause, the stock and the budget, per batch.
func (g *Gate) reserve(ctx context.Context, code string, perUserLimit int, discount int64, r voucher.ReserveRequest, createdAt, expiresAt any) (voucher.GateVerdict, error) {
	p := &pendingReserve{r: r, perUserLimit: perUserLimit, discount: discount, createdAt: createdAt, expiresAt: expiresAt, done: make(chan reserved, 1)}
	g.reservers.Add(code, p)
	select {
	case out := <-p.done:
		return out.verdict, out.err
	case <-ctx.Done():
		// Queued, or in a script already: if that admits it, the use is
		// held for an order whose caller is gone, as when a request dies
		// after its script; a retry finds it (DUPLICATE), reconciliation
		// returns it if none comes.
		return "", fmt.Errorf("gate: reserve %s on %s: %w", r.OrderID, code, ctx.Err())
	}
}

const (
	// reserveWorkers batches of one voucher's reserves are in flight at once
	// in one process, each of at most maxReserveBatch reserves.
	reserveWorkers  = 2
	maxReserveBatch = 128
	reserveTimeout  = 10 * time.Second
)

type pendingReserve struct {
	r                    voucher.ReserveRequest
	perUserLimit         int
	discount             int64
	createdAt, expiresAt any
	done                 chan reserved // buffered: the batch never waits for its caller
}

type reserved struct {
	verdict voucher.GateVerdict
	err     error
}

// reserveBatch runs reserve.lua once for the reserves of batch, all of
// code's gate, and answers each. The batch is everyone's: no one caller's
// end cancels it (the client's timeouts bound it).
func (g *Gate) reserveBatch(code string, batch []*pendingReserve) {
	ctx, cancel := context.WithTimeout(context.Background(), reserveTimeout)
	defer cancel()
	k := keysOf(code)
	campaign := voucher.IsCampaignGate(code)
	args := make([]any, 0, 1+10*len(batch))
	args = append(args, len(batch))
	scriptKeys := []string{k.stock, k.customers, k.orders, k.paused, k.meta, k.codes, k.orderCodes, k.orderPeriods, k.orderDiscounts}
	periods := newPeriodKeys(k, &scriptKeys)
	for _, p := range batch {
		campaignCode := ""
		if campaign {
			campaignCode = p.r.Code
		}
		args = append(args, p.r.OrderID, p.r.CustomerID, p.r.OrderAmount, p.perUserLimit, p.createdAt, p.expiresAt, p.discount, campaignCode, periods.spec(p.r), keep(p.r))
	}
	answers, err := reserveScript.Run(ctx, g.hot, scriptKeys, args...).StringSlice()
	if err == nil && len(answers) != len(batch) {
		err = fmt.Errorf("unexpected reply %q", answers)
	}
	for i, p := range batch {
		if err != nil {
			p.done <- reserved{err: fmt.Errorf("gate: reserve %s on %s: %w", p.r.OrderID, code, err)}
			continue
		}
		v := voucher.GateVerdict(answers[i])
		if _, _, ok := v.PeriodRefusal(); ok {
			p.done <- reserved{verdict: v}
			continue
		}
		switch v {
		case voucher.GateAdmitted, voucher.GateDuplicate, voucher.GateReleased, voucher.GateOrderConflict,
			voucher.GateAlreadyUsed, voucher.GateOutOfStock, voucher.GateSumTooLarge, voucher.GateBudgetExhausted, voucher.GateNotLoaded, voucher.GatePaused,
			voucher.GateCodeUsedUp:
			p.done <- reserved{verdict: v}
		default:
			p.done <- reserved{err: fmt.Errorf("gate: reserve %s on %s: unexpected answer %q", p.r.OrderID, code, answers[i])}
		}
	}
}

// keep is reserve.lua's and admit.lua's argument asking the gate to keep
// the order's discount (ReserveRequest.GateKeepsDiscount).
func keep(r voucher.ReserveRequest) string {
	if r.GateKeepsDiscount {
		return "1"
	}
	return ""
}

// Release gives the order's use back to the voucher and its customer if the
// gate holds the order live; false for an unknown or released order, or a
// voucher the gate does not hold.
func (g *Gate) Release(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	return g.giveBack(ctx, code, orderID, "release", discount)
}

// Forget gives a live order's use back and deletes the order, so a retry of
// it is decided from scratch: for an order the database refused, or one that
// never reached the database.
func (g *Gate) Forget(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	return g.giveBack(ctx, code, orderID, "forget", discount)
}

// Drop deletes an order the database refused as sold out, keeping its use
// out of the gate (release.lua's drop: the gate was a use too high).
func (g *Gate) Drop(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	return g.giveBack(ctx, code, orderID, "drop", discount)
}

// DropCode deletes an order of a campaign's gate the database refused as
// its code used up, keeping the code's use out of the gate (release.lua's
// dropcode) and giving the rest back.
func (g *Gate) DropCode(ctx context.Context, code, orderID string, discount int64) (bool, error) {
	return g.giveBack(ctx, code, orderID, "dropcode", discount)
}

// giveBack runs release.lua; discount goes back to the budget with the use,
// unless the gate keeps the order's own (an order with appliesTo), which
// goes back instead.
func (g *Gate) giveBack(ctx context.Context, code, orderID, mode string, discount int64) (bool, error) {
	k := keysOf(code)
	n, err := releaseScript.Run(ctx, g.rdb, []string{k.stock, k.customers, k.orders, k.meta, k.codes, k.orderCodes, k.orderPeriods, k.orderDiscounts}, orderID, mode, discount).Int()
	if err != nil {
		return false, fmt.Errorf("gate: %s %s on %s: %w", mode, orderID, code, err)
	}
	return n == 1, nil
}

// Load installs the snapshot atomically unless the gate holds the voucher;
// false when it did. A snapshot whose ExpireAt has passed is not loaded
// either (false): its keys would expire at once, and the sale is over.
func (g *Gate) Load(ctx context.Context, snap voucher.GateSnapshot) (bool, error) {
	if expired(snap) {
		return false, nil
	}
	return g.install(ctx, snap, "load")
}

// Replace installs the snapshot over whatever the gate holds and lifts a
// pause, in one step; a snapshot whose ExpireAt has passed leaves the gate
// holding nothing (and not paused).
func (g *Gate) Replace(ctx context.Context, snap voucher.GateSnapshot) error {
	if expired(snap) {
		k := keysOf(snap.Code)
		if err := g.rdb.Unlink(ctx, k.stock, k.customers, k.orders, k.meta, k.paused, k.codes, k.orderCodes, k.markers, k.orderPeriods, k.orderDiscounts).Err(); err != nil {
			return fmt.Errorf("gate: replace %s: %w", snap.Code, err)
		}
		return nil
	}
	_, err := g.install(ctx, snap, "replace")
	return err
}

// Pause makes Reserve answer PAUSED until Replace, or until ttl passes
// (0: pauseTTL) unless HoldPause extends it, so a rebuild that dies half-way
// does not stop the sale for long.
func (g *Gate) Pause(ctx context.Context, code string, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = pauseTTL
	}
	if err := g.rdb.Set(ctx, keysOf(code).paused, 1, ttl).Err(); err != nil {
		return fmt.Errorf("gate: pause %s: %w", code, err)
	}
	return nil
}

// HoldPause makes a pause last ttl from now, only while it is there
// (SET XX): a renewal never pauses again a gate whose reload lifted the
// pause, or whose pause lapsed. held is false when there was none.
func (g *Gate) HoldPause(ctx context.Context, code string, ttl time.Duration) (held bool, err error) {
	err = g.rdb.SetArgs(ctx, keysOf(code).paused, 1, redis.SetArgs{Mode: "XX", TTL: ttl}).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("gate: hold the pause of %s: %w", code, err)
	}
	return true, nil
}

// MarkerPending notes that the marker of a rebuild with epoch is about to
// be published: the gate's pause then lasts until the reload at the last
// such marker (load.lua), not the first, or until ttl passes.
func (g *Gate) MarkerPending(ctx context.Context, code, epoch string, ttl time.Duration) error {
	if err := markerScript.Run(ctx, g.rdb, []string{keysOf(code).markers}, epoch, ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("gate: marker of %s: %w", code, err)
	}
	return nil
}

// MarkerDropped takes back MarkerPending for a marker that was surely not
// published, so it does not hold the pause.
func (g *Gate) MarkerDropped(ctx context.Context, code, epoch string) error {
	if err := g.rdb.ZRem(ctx, keysOf(code).markers, epoch).Err(); err != nil {
		return fmt.Errorf("gate: marker of %s: %w", code, err)
	}
	return nil
}

// KeepPaused renews code's pause to last ttl every third of it (HoldPause)
// until stop, for as long as it is there: a rebuild keeps the sale paused
// while it runs, and a rebuild that dies leaves it paused ttl at most.
func (g *Gate) KeepPaused(ctx context.Context, code string, ttl time.Duration) (stop func()) {
	return renewEvery(ttl, func() bool {
		held, err := g.HoldPause(context.WithoutCancel(ctx), code, ttl)
		return err != nil || held // an error: the next renewal tries again
	})
}

// renewEvery calls renew every ttl/3 until stop, or until renew answers
// false; stop waits for a renewal in flight.
func renewEvery(ttl time.Duration, renew func() (again bool)) (stop func()) {
	quit, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				if !renew() {
					return
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-stopped
	}
}

// unlockScript deletes a lock only if it is still the caller's; renewScript
// extends it only if it is.
var (
	unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	renewScript  = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
)

// LockReconcile takes voucher:{CODE}:reconciling with a token of its own:
// two reconciliation passes of one voucher never overlap (the job's, an
// operator's, the one after a rebuild), so neither lowers the gate by the
// drift the other already lowered. The lock lasts ttl and is renewed every
// ttl/3 until unlock, so a pass longer than ttl keeps it, and one whose
// holder died, or whose unlock a failover to a lagging replica lost, holds
// it for ttl at most.
func (g *Gate) LockReconcile(ctx context.Context, code string, ttl time.Duration) (func(), bool, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return nil, false, err
	}
	token, key := hex.EncodeToString(b), keysOf(code).prefix+"reconciling"
	ok, err := g.rdb.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("gate: lock the reconciliation of %s: %w", code, err)
	}
	if !ok {
		return nil, false, nil
	}
	stop := renewEvery(ttl, func() bool {
		_ = renewScript.Run(context.WithoutCancel(ctx), g.rdb, []string{key}, token, ttl.Milliseconds()).Err()
		return true
	})
	unlock := func() {
		stop()
		_ = unlockScript.Run(context.WithoutCancel(ctx), g.rdb, []string{key}, token).Err()
	}
	return unlock, true, nil
}

// Lower takes up to n uses off the counter, never below zero, and returns
// what remains; 0, changing nothing, when the gate does not hold the voucher;
// lowered false, changing nothing, when its version is no longer version
// (loaded again or raised since). Unlike the other scripts it is not
// idempotent: if the client retries it after a lost reply it lowers twice,
// which undersells until the next reconciliation reports it, and never
// oversells.
func (g *Gate) Lower(ctx context.Context, code string, n int, version string) (int, bool, error) {
	k := keysOf(code)
	left, err := lowerScript.Run(ctx, g.rdb, []string{k.stock, k.meta}, n, version).Int()
	if err != nil {
		return 0, false, fmt.Errorf("gate: lower %s by %d: %w", code, n, err)
	}
	if left < 0 {
		return 0, false, nil
	}
	return left, true, nil
}

// Version reads the version of the gate's load (or last raise); "" when it
// holds nothing, or was loaded before versions were kept.
func (g *Gate) Version(ctx context.Context, code string) (string, error) {
	v, err := g.rdb.HGet(ctx, keysOf(code).meta, "version").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("gate: version of %s: %w", code, err)
	}
	return v, nil
}

// Extend moves the gate of a voucher whose total was raised or whose end
// moved later in the database (extend.lua): the stock gets exactly the
// difference between the total it stands for and the new one, the window
// (kafka mode) and the keys' expiry move. false when the gate holds nothing.
func (g *Gate) Extend(ctx context.Context, x voucher.GateExtension) (bool, error) {
	k := keysOf(x.Code)
	n, err := extendScript.Run(ctx, g.rdb, []string{k.stock, k.customers, k.orders, k.meta, k.codes, k.orderCodes, k.orderPeriods, k.orderDiscounts},
		x.OldTotal, x.NewTotal, x.OldEndsAt.UnixMilli(), x.NewEndsAt.UnixMilli(), x.ExpireAt.UnixMilli()).Int()
	if err != nil {
		return false, fmt.Errorf("gate: extend %s: %w", x.Code, err)
	}
	return n == 1, nil
}

func expired(snap voucher.GateSnapshot) bool {
	return !snap.ExpireAt.IsZero() && !snap.ExpireAt.After(time.Now())
}

// install runs load.lua in mode "load" or "replace". Snapshots larger than
// chunkSize entries are staged in several calls and swapped in by one, so
// reserve never sees half a gate.
func (g *Gate) install(ctx context.Context, snap voucher.GateSnapshot, mode string, meta ...any) (bool, error) {
	var expireAt int64
	if !snap.ExpireAt.IsZero() {
		expireAt = snap.ExpireAt.UnixMilli()
	}
	k := keysOf(snap.Code)
	chunks := split(customerEntries(snap.Customers), orderEntries(snap.Orders))
	last := chunks[len(chunks)-1]

	token, err := newToken()
	if err != nil {
		return false, err
	}
	stagedCustomers, stagedOrders := k.prefix+"load:"+token+":customers", k.prefix+"load:"+token+":orders"
	var nCustomers, nOrders int
	if len(chunks) > 1 {
		if mode == "load" || mode == "recover" {
			// Staging is work; skip it when the gate is plainly loaded.
			n, err := g.rdb.Exists(ctx, k.stock).Result()
			if err != nil {
				return false, fmt.Errorf("gate: %s %s: %w", mode, snap.Code, err)
			}
			if n == 1 && mode == "load" {
				return false, nil
			}
		}
		for _, c := range chunks[:len(chunks)-1] {
			args := append([]any{stagingTTL.Milliseconds()}, c.args()...)
			if err := stageScript.Run(ctx, g.rdb, []string{stagedCustomers, stagedOrders}, args...).Err(); err != nil {
				return false, fmt.Errorf("gate: %s %s: stage: %w", mode, snap.Code, err)
			}
			nCustomers += len(c.customers)
			nOrders += len(c.orders)
		}
	}
	if snap.Budget != nil {
		meta = append(meta, "budget", *snap.Budget)
	}
	if snap.Room != nil {
		meta = append(meta, "room", *snap.Room)
	}
	// A campaign's code counts and order codes are all staged (stage.lua
	// stages any two hashes), in chunks, and renamed in by load.lua.
	stagedCodes, stagedOrderCodes := k.prefix+"load:"+token+":codes", k.prefix+"load:"+token+":ordercodes"
	if voucher.IsCampaignGate(snap.Code) {
		codeChunks := split(codeEntries(snap.Codes), orderCodeEntries(snap.OrderCodes))
		nCodes, nOrderCodes := 0, 0
		for _, c := range codeChunks {
			if len(c.customers)+len(c.orders) == 0 {
				continue
			}
			args := append([]any{stagingTTL.Milliseconds()}, c.args()...)
			if err := stageScript.Run(ctx, g.rdb, []string{stagedCodes, stagedOrderCodes}, args...).Err(); err != nil {
				return false, fmt.Errorf("gate: %s %s: stage codes: %w", mode, snap.Code, err)
			}
			nCodes += len(c.customers)
			nOrderCodes += len(c.orders)
		}
		meta = append(meta, "usesPerCode", snap.UsesPerCode, "codes", nCodes, "orderCodes", nOrderCodes)
	}
	if snap.Total > 0 {
		meta = append(meta, "total", snap.Total)
	}
	scriptKeys := []string{k.stock, k.customers, k.orders, k.meta, stagedCustomers, stagedOrders, k.paused,
		k.codes, k.orderCodes, stagedCodes, stagedOrderCodes, k.markers, k.orderPeriods, k.orderDiscounts}
	if d := discountMeta(snap.Orders); d != "" {
		meta = append(meta, "orderDiscounts", d)
	}
	if len(snap.Periods) > 0 {
		meta = append(meta, periodMeta(k, snap, &scriptKeys)...)
	}
	args := append([]any{mode, snap.Remaining, snap.PerUserLimit, expireAt, nCustomers, nOrders, len(meta) / 2}, meta...)
	args = append(args, last.args()...)
	n, err := loadScript.Run(ctx, g.rdb, scriptKeys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("gate: %s %s: %w", mode, snap.Code, err)
	}
	return n == 1, nil
}

// Snapshot reads the voucher's gate in one MULTI; ok is false when the gate
// holds nothing for it. Orders come sorted by orderId.
func (g *Gate) Snapshot(ctx context.Context, code string) (voucher.GateSnapshot, bool, error) {
	k := keysOf(code)
	pipe := g.rdb.TxPipeline()
	stock := pipe.Get(ctx, k.stock)
	meta := pipe.HGetAll(ctx, k.meta)
	customers := pipe.HGetAll(ctx, k.customers)
	orders := pipe.HGetAll(ctx, k.orders)
	discounts := pipe.HGetAll(ctx, k.orderDiscounts)
	var codes, orderCodes *redis.MapStringStringCmd
	if voucher.IsCampaignGate(code) {
		codes, orderCodes = pipe.HGetAll(ctx, k.codes), pipe.HGetAll(ctx, k.orderCodes)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return voucher.GateSnapshot{}, false, fmt.Errorf("gate: snapshot %s: %w", code, err)
	}
	if errors.Is(stock.Err(), redis.Nil) {
		return voucher.GateSnapshot{}, false, nil
	}
	for _, c := range []redis.Cmder{stock, meta, customers, orders, discounts} {
		if err := c.Err(); err != nil {
			return voucher.GateSnapshot{}, false, fmt.Errorf("gate: snapshot %s: %w", code, err)
		}
	}
	snap, err := parseSnapshot(code, stock.Val(), meta.Val(), customers.Val(), orders.Val())
	for i := range snap.Orders {
		if err == nil {
			err = withDiscount(&snap.Orders[i], discounts.Val()[snap.Orders[i].OrderID])
		}
	}
	if err == nil && codes != nil {
		err = parseCodes(&snap, meta.Val(), codes, orderCodes)
	}
	if err != nil {
		return voucher.GateSnapshot{}, false, fmt.Errorf("gate: snapshot %s: %w", code, err)
	}
	return snap, true, nil
}

// Remaining reads the voucher's stock counter; ok is false when the gate
// holds nothing for it.
func (g *Gate) Remaining(ctx context.Context, code string) (int, bool, error) {
	n, err := g.rdb.Get(ctx, keysOf(code).stock).Int()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("gate: remaining %s: %w", code, err)
	}
	return n, true, nil
}

// Availability reads the stock counter, the customer's uses and the budget
// left in one script (availability.lua: what checkVoucher decides on; it
// changes nothing), run with the hot scripts so a stampede of checks is
// pipelined like one of reserves; loaded is false when the gate holds
// nothing for the voucher. On a campaign's gate campaignCode is the code
// checked: its uses left bound Remaining too. periods are those of the
// voucher's period limits holding now: their uses (the customer's for a
// CUSTOMER limit) fill PeriodUses, by limit.
func (g *Gate) Availability(ctx context.Context, code, campaignCode string, customerID int64, periods ...voucher.GatePeriod) (voucher.Availability, bool, error) {
	k := keysOf(code)
	if !voucher.IsCampaignGate(code) {
		campaignCode = ""
	}
	scriptKeys := []string{k.stock, k.customers, k.meta, k.codes}
	args := []any{customerID, campaignCode}
	limits := 0
	for _, p := range periods {
		scriptKeys = append(scriptKeys, k.period(p))
		args = append(args, p.Field(customerID))
		limits = max(limits, p.Limit+1)
	}
	vals, err := availabilityScript.Run(ctx, g.hot, scriptKeys, args...).StringSlice()
	if err != nil {
		return voucher.Availability{}, false, fmt.Errorf("gate: availability %s: %w", code, err)
	}
	if len(vals) == 0 {
		return voucher.Availability{}, false, nil
	}
	fixed := 4
	if campaignCode != "" {
		fixed = 5
	}
	if len(vals) != fixed+len(periods) {
		return voucher.Availability{}, false, fmt.Errorf("gate: availability %s: unexpected answer %q", code, vals)
	}
	var a voucher.Availability
	if len(periods) > 0 {
		a.PeriodUses = make(voucher.PeriodUses, limits)
		for i, p := range periods {
			n, err := strconv.Atoi(vals[fixed+i])
			if err != nil {
				return voucher.Availability{}, false, fmt.Errorf("gate: availability %s: period uses %q: %w", code, vals[fixed+i], err)
			}
			a.PeriodUses[p.Limit] = n
		}
		vals = vals[:fixed]
	}
	var err1, err2, err3, err4, err5 error
	if len(vals) == 5 {
		var left int
		left, err4 = strconv.Atoi(vals[4])
		a.CodeRemaining = &left
	}
	a.Remaining, err1 = strconv.Atoi(vals[0])
	a.CustomerUses, err2 = strconv.Atoi(vals[1])
	if vals[2] != "" {
		var left int64
		left, err3 = strconv.ParseInt(vals[2], 10, 64)
		a.BudgetLeft = &left
	}
	if vals[3] != "" {
		var room int64
		room, err5 = strconv.ParseInt(vals[3], 10, 64)
		a.Room = &room
	}
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return voucher.Availability{}, false, fmt.Errorf("gate: availability %s: %w", code, err)
	}
	return a, true, nil
}

// Unload deletes the voucher's keys in one command (UNLINK frees large hashes
// off Redis's main thread), so the next warm-up rebuilds it from the database;
// a pause stays until Replace or its timeout.
func (g *Gate) Unload(ctx context.Context, code string) error {
	k := keysOf(code)
	if err := g.rdb.Unlink(ctx, k.stock, k.customers, k.orders, k.meta, k.codes, k.orderCodes, k.orderPeriods, k.orderDiscounts).Err(); err != nil {
		return fmt.Errorf("gate: unload %s: %w", code, err)
	}
	return nil
}

// entry is one hash field of a snapshot: a customer's count or an order.
type entry struct{ field, value string }

// chunk is what one script call carries: n, n customer pairs, order pairs.
type chunk struct{ customers, orders []entry }

func (c chunk) args() []any {
	args := make([]any, 0, 1+2*(len(c.customers)+len(c.orders)))
	args = append(args, len(c.customers))
	for _, e := range slices.Concat(c.customers, c.orders) {
		args = append(args, e.field, e.value)
	}
	return args
}

// split cuts the entries into chunks of at most chunkSize; there is always
// at least one chunk, the one load.lua carries.
func split(customers, orders []entry) []chunk {
	chunks := []chunk{{}}
	for i, e := range slices.Concat(customers, orders) {
		c := &chunks[len(chunks)-1]
		if len(c.customers)+len(c.orders) == chunkSize {
			chunks = append(chunks, chunk{})
			c = &chunks[len(chunks)-1]
		}
		if i < len(customers) {
			c.customers = append(c.customers, e)
		} else {
			c.orders = append(c.orders, e)
		}
	}
	return chunks
}

func codeEntries(codes map[string]int) []entry {
	var es []entry
	for code, n := range codes {
		if n > 0 { // no zero counts, as for customers
			es = append(es, entry{code, strconv.Itoa(n)})
		}
	}
	return es
}

func orderCodeEntries(orderCodes map[string]string) []entry {
	es := make([]entry, 0, len(orderCodes))
	for id, code := range orderCodes {
		es = append(es, entry{id, code})
	}
	return es
}

// parseCodes reads a campaign's gate's code counts and order codes.
func parseCodes(snap *voucher.GateSnapshot, meta map[string]string, codes, orderCodes *redis.MapStringStringCmd) error {
	for _, c := range []*redis.MapStringStringCmd{codes, orderCodes} {
		if err := c.Err(); err != nil {
			return err
		}
	}
	var err error
	if snap.UsesPerCode, err = strconv.Atoi(meta["usesPerCode"]); err != nil {
		return fmt.Errorf("usesPerCode %q: %w", meta["usesPerCode"], err)
	}
	snap.Codes = make(map[string]int, len(codes.Val()))
	for code, v := range codes.Val() {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("code %q: uses %q: %w", code, v, err)
		}
		snap.Codes[code] = n
	}
	snap.OrderCodes = orderCodes.Val()
	return nil
}

func customerEntries(customers map[int64]int) []entry {
	var es []entry
	for id, n := range customers {
		if n > 0 { // the gate keeps no zero counts (release.lua deletes them)
			es = append(es, entry{strconv.FormatInt(id, 10), strconv.Itoa(n)})
		}
	}
	return es
}

func orderEntries(orders []voucher.GateOrder) []entry {
	es := make([]entry, 0, len(orders))
	for _, o := range orders {
		es = append(es, entry{o.OrderID, orderValue(o)})
	}
	return es
}

// orderValue writes an order as the scripts keep it: with its state and
// times when it has them (kafka mode), else as sync mode does.
func orderValue(o voucher.GateOrder) string {
	v := strconv.FormatInt(o.CustomerID, 10) + ":" + strconv.FormatInt(o.OrderAmount, 10)
	if o.CreatedAt.IsZero() {
		if o.Released {
			v += ":released"
		}
		return v
	}
	state := "live"
	switch {
	case o.Void:
		state = "void"
	case o.Lost:
		state = "lost"
	case o.Pending:
		state = "pending"
	case o.Released:
		state = "released"
	case o.Releasing:
		state = "releasing"
	case o.Confirmed:
		state = "confirmed"
	}
	v += ":" + state + ":" + strconv.FormatInt(o.CreatedAt.UnixMilli(), 10) + ":" + strconv.FormatInt(o.ExpiresAt.UnixMilli(), 10)
	if o.Position > 0 {
		v += ":" + strconv.Itoa(o.Position)
	}
	return v
}

func parseSnapshot(code, stock string, meta, customers, orders map[string]string) (voucher.GateSnapshot, error) {
	snap := voucher.GateSnapshot{Code: code, Customers: make(map[int64]int, len(customers))}
	var err error
	if snap.Remaining, err = strconv.Atoi(stock); err != nil {
		return snap, fmt.Errorf("stock %q: %w", stock, err)
	}
	if snap.PerUserLimit, err = strconv.Atoi(meta["perUserLimit"]); err != nil {
		return snap, fmt.Errorf("perUserLimit %q: %w", meta["perUserLimit"], err)
	}
	ms, err := strconv.ParseInt(meta["expireAt"], 10, 64)
	if err != nil {
		return snap, fmt.Errorf("expireAt %q: %w", meta["expireAt"], err)
	}
	if ms > 0 {
		snap.ExpireAt = time.UnixMilli(ms)
	}
	snap.Epoch = meta["epoch"]
	snap.Version = meta["version"]
	if a, ok := meta["admitted"]; ok {
		if snap.Admitted, err = strconv.Atoi(a); err != nil {
			return snap, fmt.Errorf("admitted %q: %w", a, err)
		}
	}
	if b, ok := meta["budget"]; ok {
		left, err := strconv.ParseInt(b, 10, 64)
		if err != nil {
			return snap, fmt.Errorf("budget %q: %w", b, err)
		}
		snap.Budget = &left
	}
	if r, ok := meta["room"]; ok {
		room, err := strconv.ParseInt(r, 10, 64)
		if err != nil {
			return snap, fmt.Errorf("room %q: %w", r, err)
		}
		snap.Room = &room
	}
	if _, ok := meta["startsAt"]; ok {
		terms, err := parseTerms(meta)
		if err != nil {
			return snap, err
		}
		snap.Terms = &terms
	}
	for id, n := range customers {
		cid, err1 := strconv.ParseInt(id, 10, 64)
		count, err2 := strconv.Atoi(n)
		if err := errors.Join(err1, err2); err != nil {
			return snap, fmt.Errorf("customer %q: %w", id, err)
		}
		snap.Customers[cid] = count
	}
	for id, v := range orders {
		o, err := parseOrder(id, v)
		if err != nil {
			return snap, err
		}
		snap.Orders = append(snap.Orders, o)
	}
	slices.SortFunc(snap.Orders, func(a, b voucher.GateOrder) int { return strings.Compare(a.OrderID, b.OrderID) })
	return snap, nil
}

// parseTerms reads a kafka-mode gate's window and minimum (load.lua): the
// window is kept on Redis's clock, offset from the database's.
func parseTerms(meta map[string]string) (voucher.GateTerms, error) {
	var n [4]int64
	for i, field := range []string{"startsAt", "endsAt", "offset", "minOrder"} {
		v, err := strconv.ParseInt(meta[field], 10, 64)
		if err != nil {
			return voucher.GateTerms{}, fmt.Errorf("%s %q: %w", field, meta[field], err)
		}
		n[i] = v
	}
	return voucher.GateTerms{Epoch: meta["epoch"], StartsAt: time.UnixMilli(n[0] - n[2]), EndsAt: time.UnixMilli(n[1] - n[2]), MinOrderAmount: n[3]}, nil
}

// parseOrder reads "customerId:amount", "customerId:amount:released" or
// "customerId:amount:STATE:createdAt:expiresAt[:position]".
func parseOrder(id, v string) (voucher.GateOrder, error) {
	o := voucher.GateOrder{OrderID: id}
	malformed := fmt.Errorf("order %q: malformed value %q", id, v)
	f := strings.Split(v, ":")
	if len(f) != 2 && len(f) != 3 && len(f) != 5 && len(f) != 6 {
		return o, malformed
	}
	if len(f) == 6 {
		p, err := strconv.Atoi(f[5])
		if err != nil || p < 1 {
			return o, malformed
		}
		o.Position, f = p, f[:5]
	}
	cid, err1 := strconv.ParseInt(f[0], 10, 64)
	amt, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return o, malformed
	}
	o.CustomerID, o.OrderAmount = cid, amt
	if len(f) == 2 {
		return o, nil
	}
	switch f[2] {
	case "live":
	case "pending":
		o.Pending = true
	case "void":
		o.Void = true
	case "lost":
		o.Lost = true
	case "confirmed":
		o.Confirmed = true
	case "releasing":
		o.Releasing = true
	case "released":
		o.Released = true
	default:
		return o, malformed
	}
	if len(f) == 3 {
		if !o.Released || o.Pending || o.Void || o.Lost {
			return o, malformed
		}
		return o, nil
	}
	created, err1 := strconv.ParseInt(f[3], 10, 64)
	expires, err2 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil {
		return o, malformed
	}
	o.CreatedAt, o.ExpiresAt = time.UnixMilli(created), time.UnixMilli(expires)
	return o, nil
}

// withDiscount sets o's Discount from the gate's record of it ("" for
// none: its amount's).
func withDiscount(o *voucher.GateOrder, record string) error {
	if record == "" {
		return nil
	}
	d, err := strconv.ParseInt(record, 10, 64)
	if err != nil || d < 0 {
		return fmt.Errorf("order %q: malformed discount %q", o.OrderID, record)
	}
	o.Discount = &d
	return nil
}

// discountMeta is load.lua's meta pair orderDiscounts: the discounts the
// snapshot's orders keep, 'orderId' \31 discount, separated by \30; "" for
// none.
func discountMeta(orders []voucher.GateOrder) string {
	var b strings.Builder
	for _, o := range orders {
		if o.Discount == nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(30)
		}
		b.WriteString(o.OrderID)
		b.WriteByte(31)
		b.WriteString(strconv.FormatInt(*o.Discount, 10))
	}
	return b.String()
}

func newToken() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// periodMeta is load.lua's meta pairs periods and orderPeriods for a
// snapshot's period counts, their hashes appended to keys.
func periodMeta(k keys, snap voucher.GateSnapshot, scriptKeys *[]string) []any {
	var periods, orderPeriods strings.Builder
	fields := make([]string, len(snap.Periods)) // "FIELD|KEY" of each period, for a customer's: its KEY
	for i, p := range snap.Periods {
		name := k.period(p.GatePeriod)
		*scriptKeys = append(*scriptKeys, name)
		fmt.Fprintf(&periods, "%d\t%d\t", len(*scriptKeys), p.End.UnixMilli())
		first := true
		for customer, uses := range p.Uses {
			if uses <= 0 {
				continue
			}
			if !first {
				periods.WriteByte(',')
			}
			first = false
			fmt.Fprintf(&periods, "%d=%d", customer, uses)
		}
		periods.WriteByte('\n')
		fields[i] = name
	}
	customerOf := make(map[string]int64, len(snap.Orders))
	for _, o := range snap.Orders {
		customerOf[o.OrderID] = o.CustomerID
	}
	for _, id := range slices.Sorted(maps.Keys(snap.OrderPeriods)) {
		if orderPeriods.Len() > 0 {
			orderPeriods.WriteByte(30)
		}
		orderPeriods.WriteString(id)
		orderPeriods.WriteByte(31)
		for j, i := range snap.OrderPeriods[id] {
			if j > 0 {
				orderPeriods.WriteByte('\n')
			}
			orderPeriods.WriteString(strconv.FormatInt(snap.Periods[i].Field(customerOf[id]), 10) + "|" + fields[i])
		}
	}
	out := []any{"periods", periods.String()}
	if orderPeriods.Len() > 0 {
		out = append(out, "orderPeriods", orderPeriods.String())
	}
	return out
}

// PeriodCounts reads the gate's counts of periods (each hash whole) and,
// for each of orderIDs the gate holds a period record of, the indexes in
// periods of those it counts in (reconciliation). A period the gate holds
// nothing of has no counts.
func (g *Gate) PeriodCounts(ctx context.Context, code string, periods []voucher.GatePeriod, orderIDs []string) ([]voucher.GatePeriodCount, map[string][]int, error) {
	k := keysOf(code)
	pipe := g.rdb.TxPipeline()
	hashes := make([]*redis.MapStringStringCmd, len(periods))
	index := make(map[string]int, len(periods))
	for i, p := range periods {
		hashes[i] = pipe.HGetAll(ctx, k.period(p))
		index[k.period(p)] = i
	}
	var held *redis.SliceCmd
	if len(orderIDs) > 0 {
		held = pipe.HMGet(ctx, k.orderPeriods, orderIDs...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("gate: period counts of %s: %w", code, err)
	}
	out := make([]voucher.GatePeriodCount, len(periods))
	for i, p := range periods {
		out[i] = voucher.GatePeriodCount{GatePeriod: p, Uses: map[int64]int{}}
		for field, v := range hashes[i].Val() {
			customer, err1 := strconv.ParseInt(field, 10, 64)
			n, err2 := strconv.Atoi(v)
			if err := errors.Join(err1, err2); err != nil {
				return nil, nil, fmt.Errorf("gate: period counts of %s: %q=%q: %w", code, field, v, err)
			}
			out[i].Uses[customer] = n
		}
	}
	orders := map[string][]int{}
	if held != nil {
		for j, v := range held.Val() {
			record, ok := v.(string)
			if !ok {
				continue
			}
			for line := range strings.SplitSeq(record, "\n") {
				if _, key, ok := strings.Cut(line, "|"); ok {
					if i, ok := index[key]; ok {
						orders[orderIDs[j]] = append(orders[orderIDs[j]], i)
					}
				}
			}
		}
	}
	return out, orders, nil
}
