package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/voucher"
	"voucherd/lua"
)

// The gate's calls for the Kafka write path, where the gate, not the
// database, decides a flash reservation's confirm, release and expiry (see
// internal/voucher/flash_kafka.go): the orders hash then holds each order's state
// and times, "customerId:amount:STATE:createdAt:expiresAt".

var (
	confirmScript      = redis.NewScript(lua.Confirm)
	markReleasedScript = redis.NewScript(lua.MarkReleased)
	admitScript        = redis.NewScript(lua.Admit)
	admissionScript    = redis.NewScript(lua.Admission)
	applyCheckScript   = redis.NewScript(lua.ApplyCheck)
)

// Admit decides a reserve in kafka mode (admit.lua): the verdict, the order
// as the gate holds it after the call, and the epoch. The reserves of one
// voucher queued at the same moment are decided by one script call, each as
// if alone and in order: a stampede costs the gate one script (and its
// reads of the voucher's terms) per batch, not per reserve.
func (g *Gate) Admit(ctx context.Context, code string, r voucher.ReserveRequest, discount int64) (voucher.Admission, error) {
	p := &pendingAdmit{r: r, discount: discount, done: make(chan admitted, 1)}
	g.admitters.Add(code, p)
	select {
	case out := <-p.done:
		return out.a, out.err
	case <-ctx.Done():
		return voucher.Admission{}, fmt.Errorf("gate: admit %s on %s: %w", r.OrderID, code, ctx.Err())
	}
}

const (
	// admitWorkers batches of one voucher's reserves are in flight at once
	// in one process, each of at most maxAdmitBatch reserves.
	admitWorkers  = 2
	maxAdmitBatch = 64
	admitTimeout  = 10 * time.Second
)

type pendingAdmit struct {
	r        voucher.ReserveRequest
	discount int64
	done     chan admitted // buffered: the batch never waits for its caller
}

type admitted struct {
	a   voucher.Admission
	err error
}

// admitBatch decides a batch of code's reserves. The batch is everyone's:
// no one caller's end cancels it (the client's timeouts bound it). A caller
// that gave up first answers UNAVAILABLE; an admission made for it stays
// pending without an owner, and its lease runs out (reconciliation voids
// it), as when a request dies after its script.
func (g *Gate) admitBatch(code string, batch []*pendingAdmit) {
	ctx, cancel := context.WithTimeout(context.Background(), admitTimeout)
	defer cancel()
	g.admit(ctx, code, batch)
}

// admit runs admit.lua once for the reserves of batch, all of code, and
// answers each.
func (g *Gate) admit(ctx context.Context, code string, batch []*pendingAdmit) {
	k := keysOf(code)
	keys := make([]string, 0, 7+len(batch))
	keys = append(keys, k.stock, k.customers, k.orders, k.meta, k.paused, k.orderPeriods, k.orderDiscounts)
	claims := 0
	if !g.cluster {
		// One script claims the orderIds too: a round trip and a
		// script less a reserve.
		for _, p := range batch {
			keys = append(keys, orderKey(p.r.OrderID))
		}
		claims = len(batch)
	}
	periods := newPeriodKeys(k, &keys)
	args := make([]any, 0, 4+6*len(batch))
	args = append(args, len(batch), code, claimTTL.Milliseconds(), claims)
	for _, p := range batch {
		args = append(args, p.r.OrderID, p.r.CustomerID, p.r.OrderAmount, p.discount, periods.spec(p.r), keep(p.r))
	}
	reply, err := admitScript.Run(ctx, g.hot, keys, args...).StringSlice()
	if err == nil && len(reply) != 4*len(batch)+1 {
		err = fmt.Errorf("unexpected reply %q", reply)
	}
	for i, p := range batch {
		if err != nil {
			p.done <- admitted{err: fmt.Errorf("gate: admit %s on %s: %w", p.r.OrderID, code, err)}
			continue
		}
		a, err := g.admission(p.r.OrderID, reply[4*i], reply[4*i+1], reply[4*i+2])
		if err == nil {
			err = withDiscount(&a.Order, reply[4*i+3])
		}
		a.Server = reply[4*len(batch)]
		if err != nil {
			err = fmt.Errorf("gate: admit %s on %s: %w", p.r.OrderID, code, err)
		}
		p.done <- admitted{a, err}
	}
}

// admission reads one reserve's answer of admit.lua.
func (g *Gate) admission(orderID, verdict, value, epoch string) (voucher.Admission, error) {
	a := voucher.Admission{Verdict: voucher.GateVerdict(verdict), Epoch: epoch, Claimed: !g.cluster}
	if _, _, ok := a.Verdict.PeriodRefusal(); ok {
		return a, nil
	}
	switch a.Verdict {
	case voucher.GatePaused, voucher.GateNotLoaded, voucher.GateStale, voucher.GateNotEligible, voucher.GateClaimedElsewhere,
		voucher.GateAlreadyUsed, voucher.GateOutOfStock, voucher.GateSumTooLarge, voucher.GateBudgetExhausted:
		return a, nil
	case voucher.GateOrderConflict, voucher.GateReleased, voucher.GateLost, voucher.GatePending,
		voucher.GateDuplicate, voucher.GateAdmitted, voucher.GateAdopted:
		var err error
		if a.Order, err = parseOrder(orderID, value); err != nil {
			return voucher.Admission{}, err
		}
		return a, nil
	}
	return voucher.Admission{}, fmt.Errorf("unexpected answer %q", verdict)
}

// Settle settles a pending admission made in epoch by compare-and-set on its
// token (admission.lua). Finalizing is what every winner of a kafka-mode
// sale does once its event is acknowledged: the finalizes of one voucher
// queued at the same moment share one script call (admission.lua settles
// each as if alone), so a stampede costs the gate one call per batch, not
// per winner. The other operations are rare and run alone.
func (g *Gate) Settle(ctx context.Context, code string, op voucher.SettleOp, o voucher.GateOrder, epoch string, discount int64) (voucher.SettleAnswer, voucher.GateOrder, error) {
	p := &pendingSettle{order: o, epoch: epoch, discount: discount, done: make(chan settled, 1)}
	if op != voucher.SettleFinalize {
		g.settle(ctx, code, op, []*pendingSettle{p})
		out := <-p.done
		return out.answer, out.after, out.err
	}
	g.finalizers.Add(code, p)
	select {
	case out := <-p.done:
		return out.answer, out.after, out.err
	case <-ctx.Done():
		return "", voucher.GateOrder{}, fmt.Errorf("gate: finalize %s on %s: %w", o.OrderID, code, ctx.Err())
	}
}

const (
	// finalizeWorkers batches of one voucher's finalizes are in flight at
	// once in one process, each of at most maxFinalizeBatch admissions.
	finalizeWorkers  = 2
	maxFinalizeBatch = 128
	finalizeTimeout  = 10 * time.Second
)

// pendingSettle is one admission to settle and where its outcome goes.
type pendingSettle struct {
	order    voucher.GateOrder
	epoch    string
	discount int64
	done     chan settled // buffered: the batch never waits for its caller
}

type settled struct {
	answer voucher.SettleAnswer
	after  voucher.GateOrder
	err    error
}

// finalizeBatch finalizes a batch of code's admissions. The batch is
// everyone's: no one caller's end cancels it (the client's timeouts bound
// it). A caller that gives up first answers UNAVAILABLE; its event is on
// the broker, so the consumer settles it and a retry finds it live.
func (g *Gate) finalizeBatch(code string, batch []*pendingSettle) {
	ctx, cancel := context.WithTimeout(context.Background(), finalizeTimeout)
	defer cancel()
	g.settle(ctx, code, voucher.SettleFinalize, batch)
}

// settle runs admission.lua once for the admissions of batch, all of code,
// and answers each.
func (g *Gate) settle(ctx context.Context, code string, op voucher.SettleOp, batch []*pendingSettle) {
	k := keysOf(code)
	args := make([]any, 0, 2+5*len(batch))
	args = append(args, string(op), len(batch))
	for _, p := range batch {
		o := p.order
		who := strconv.FormatInt(o.CustomerID, 10) + ":" + strconv.FormatInt(o.OrderAmount, 10)
		args = append(args, o.OrderID, o.CreatedAt.UnixMilli(), p.epoch, who, p.discount)
	}
	reply, err := admissionScript.Run(ctx, g.hot, []string{k.stock, k.customers, k.orders, k.meta, k.paused, k.orderPeriods, k.orderDiscounts}, args...).StringSlice()
	if err == nil && len(reply) != 2*len(batch) {
		err = fmt.Errorf("unexpected reply %q", reply)
	}
	for i, p := range batch {
		if err != nil {
			p.done <- settled{err: fmt.Errorf("gate: %s %s on %s: %w", op, p.order.OrderID, code, err)}
			continue
		}
		p.done <- settleAnswer(code, op, p.order.OrderID, reply[2*i], reply[2*i+1])
	}
}

func settleAnswer(code string, op voucher.SettleOp, orderID, answer, value string) settled {
	a := voucher.SettleAnswer(answer)
	switch a {
	case voucher.SettleOK, voucher.SettleFail, voucher.SettleStale:
	default:
		return settled{err: fmt.Errorf("gate: %s %s on %s: unexpected answer %q", op, orderID, code, answer)}
	}
	var after voucher.GateOrder
	if value != "" {
		var err error
		if after, err = parseOrder(orderID, value); err != nil {
			return settled{err: fmt.Errorf("gate: %s %s on %s: %w", op, orderID, code, err)}
		}
	}
	return settled{answer: a, after: after}
}

// ApplyCheck asks the gate which events of one voucher stand
// (apply_check.lua): one verdict per event, in order. periods[i], if any,
// are the periods of the voucher's period limits holding evs[i]'s
// CreatedAt, which a re-admission counts its use in.
func (g *Gate) ApplyCheck(ctx context.Context, code string, evs []voucher.Event, periods [][]voucher.GatePeriod) ([]voucher.ApplyVerdict, error) {
	k := keysOf(code)
	keys := []string{k.stock, k.customers, k.orders, k.meta, k.orderDiscounts, k.orderPeriods}
	specs := newPeriodKeys(k, &keys)
	args := make([]any, 0, 1+10*len(evs))
	args = append(args, len(evs))
	for i, ev := range evs {
		spec := ""
		if i < len(periods) && len(periods[i]) > 0 {
			spec = specs.spec(voucher.ReserveRequest{PeriodAt: ev.CreatedAt, GatePeriods: periods[i]})
		}
		args = append(args, ev.OrderID, ev.CustomerID, ev.OrderAmount, ev.CreatedAt.UnixMilli(), ev.ExpiresAt.UnixMilli(), ev.Epoch, ev.DiscountAmount, string(ev.Kind), ev.Position, spec)
	}
	reply, err := applyCheckScript.Run(ctx, g.rdb, keys, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("gate: apply check of %d event(s) on %s: %w", len(evs), code, err)
	}
	if len(reply) != len(evs) {
		return nil, fmt.Errorf("gate: apply check on %s: %d answers for %d events", code, len(reply), len(evs))
	}
	out := make([]voucher.ApplyVerdict, len(reply))
	for i, r := range reply {
		switch v := voucher.ApplyVerdict(r); v {
		case voucher.ApplyStands, voucher.ApplySkip, voucher.ApplyUnchecked:
			out[i] = v
		default:
			return nil, fmt.Errorf("gate: apply check on %s: unexpected answer %q", code, r)
		}
	}
	return out, nil
}

// Recover installs a snapshot with its kafka-mode terms (load.lua in mode
// "recover", "replace" or "load").
func (g *Gate) Recover(ctx context.Context, snap voucher.GateSnapshot, terms voucher.GateTerms, mode string) (bool, error) {
	if expired(snap) {
		return false, nil
	}
	extra := []any{
		"epoch", terms.Epoch, "startsAt", terms.StartsAt.UnixMilli(), "endsAt", terms.EndsAt.UnixMilli(),
		"dbNow", terms.DatabaseNow.UnixMilli(), "minOrder", terms.MinOrderAmount,
		"ttl", terms.TTL.Milliseconds(), "lease", terms.Lease.Milliseconds(),
		// Even 0: a gate without it is one loaded before positions were
		// kept, which gives none (admit.lua).
		"admitted", snap.Admitted,
	}
	return g.install(ctx, snap, mode, extra...)
}

// healthyScript is lua/healthy.lua.
var healthyScript = redis.NewScript(lua.Healthy)

// Healthy reports whether the gate holds the voucher, loaded on the Redis
// server that now serves it and not marked as having lost data.
func (g *Gate) Healthy(ctx context.Context, code string) (bool, string, error) {
	k := keysOf(code)
	vals, err := healthyScript.Run(ctx, g.rdb, []string{k.stock, k.meta}).Slice()
	if err != nil {
		return false, "", fmt.Errorf("gate: health of %s: %w", code, err)
	}
	if len(vals) != 2 {
		return false, "", fmt.Errorf("gate: health of %s: %d values, want 2", code, len(vals))
	}
	ok, _ := vals[0].(int64)
	server, _ := vals[1].(string)
	return ok == 1, server, nil
}

// ReserveTimed is Reserve remembering an admitted order as live with its
// createdAt and expiresAt (Unix ms), which confirm and expiry decide on. The
// verdicts and their order are Reserve's.
func (g *Gate) ReserveTimed(ctx context.Context, code string, perUserLimit int, discount int64, r voucher.ReserveRequest, createdAt, expiresAt time.Time) (voucher.GateVerdict, error) {
	return g.reserve(ctx, code, perUserLimit, discount, r, createdAt.UnixMilli(), expiresAt.UnixMilli())
}

// Order reads what the gate remembers of an order; ok is false when it does
// not know it or holds nothing for the voucher.
func (g *Gate) Order(ctx context.Context, code, orderID string) (voucher.GateOrder, bool, error) {
	k := keysOf(code)
	pipe := g.rdb.TxPipeline()
	loaded := pipe.Exists(ctx, k.stock)
	value := pipe.HGet(ctx, k.orders, orderID)
	discount := pipe.HGet(ctx, k.orderDiscounts, orderID)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return voucher.GateOrder{}, false, fmt.Errorf("gate: order %s on %s: %w", orderID, code, err)
	}
	if loaded.Val() == 0 || errors.Is(value.Err(), redis.Nil) {
		return voucher.GateOrder{}, false, nil
	}
	if err := value.Err(); err != nil {
		return voucher.GateOrder{}, false, fmt.Errorf("gate: order %s on %s: %w", orderID, code, err)
	}
	o, err := parseOrder(orderID, value.Val())
	if err == nil {
		err = withDiscount(&o, discount.Val()) // "" when none (redis.Nil)
	}
	if err != nil {
		return voucher.GateOrder{}, false, fmt.Errorf("gate: order %s on %s: %w", orderID, code, err)
	}
	return o, true, nil
}

// Confirm decides a confirm at now in one script: PAUSED, NOT_LOADED,
// UNKNOWN, LEGACY, RELEASED, CONFIRMED, EXPIRED or CONFIRMED_NOW, with the
// order as the gate holds it after the call.
func (g *Gate) Confirm(ctx context.Context, code, orderID string) (voucher.GateDecision, voucher.GateOrder, error) {
	k := keysOf(code)
	return g.decide(ctx, confirmScript, "confirm", code, orderID, []string{k.stock, k.orders, k.paused, k.meta, k.orderDiscounts}, orderID)
}

// MarkReleased decides a release (expireOnly false) or an expiry (true: only
// once now >= expiresAt) in one script: PAUSED, NOT_LOADED, UNKNOWN, LEGACY,
// RELEASED, CONFIRMED, NOT_DUE or RELEASED_NOW. A released order keeps its
// use until Release, which runs once the database has released the row.
func (g *Gate) MarkReleased(ctx context.Context, code, orderID string, expireOnly bool) (voucher.GateDecision, voucher.GateOrder, error) {
	k := keysOf(code)
	mode := "release"
	if expireOnly {
		mode = "expire"
	}
	return g.decide(ctx, markReleasedScript, mode, code, orderID, []string{k.stock, k.orders, k.paused, k.meta, k.orderDiscounts}, orderID, mode)
}

func (g *Gate) decide(ctx context.Context, script *redis.Script, op, code, orderID string, keys []string, args ...any) (voucher.GateDecision, voucher.GateOrder, error) {
	reply, err := script.Run(ctx, g.rdb, keys, args...).StringSlice()
	if err != nil {
		return "", voucher.GateOrder{}, fmt.Errorf("gate: %s %s on %s: %w", op, orderID, code, err)
	}
	// The third value: the order's kept discount ('' for none).
	if len(reply) != 3 {
		return "", voucher.GateOrder{}, fmt.Errorf("gate: %s %s on %s: unexpected reply %q", op, orderID, code, reply)
	}
	d := voucher.GateDecision(reply[0])
	switch d {
	case voucher.DecisionPaused, voucher.DecisionNotLoaded, voucher.DecisionUnknown, voucher.DecisionStale:
		return d, voucher.GateOrder{}, nil
	case voucher.DecisionPending, voucher.DecisionLegacy, voucher.DecisionReleased, voucher.DecisionConfirmed, voucher.DecisionExpired,
		voucher.DecisionNotDue, voucher.DecisionConfirmedNow, voucher.DecisionReleasedNow:
		o, err := parseOrder(orderID, reply[1])
		if err == nil {
			err = withDiscount(&o, reply[2])
		}
		if err != nil {
			return "", voucher.GateOrder{}, fmt.Errorf("gate: %s %s on %s: %w", op, orderID, code, err)
		}
		return d, o, nil
	}
	return "", voucher.GateOrder{}, fmt.Errorf("gate: %s %s on %s: unexpected answer %q", op, orderID, code, reply[0])
}

var orderClaimScript = redis.NewScript(lua.OrderClaim)

// claimTTL is how long an orderId stays claimed for its voucher: far longer
// than the consumer's delay, after which the database knows the order.
const claimTTL = 24 * time.Hour

func orderKey(orderID string) string { return "order:{" + orderID + "}" }

// ClaimOrder claims an orderId for a voucher and returns the voucher holding
// the claim (code itself when the orderId was free or already claimed by
// it) and the run_id of the Redis server that holds the claim.
func (g *Gate) ClaimOrder(ctx context.Context, orderID, code string) (owner, server string, err error) {
	reply, err := orderClaimScript.Run(ctx, g.hot, []string{orderKey(orderID)}, "claim", code, claimTTL.Milliseconds()).StringSlice()
	if err == nil && len(reply) != 2 {
		err = fmt.Errorf("unexpected reply %q", reply)
	}
	if err != nil {
		return "", "", fmt.Errorf("gate: claim %s for %s: %w", orderID, code, err)
	}
	return reply[0], reply[1], nil
}

// UnclaimOrder drops the voucher's claim on an orderId, if it holds it.
func (g *Gate) UnclaimOrder(ctx context.Context, orderID, code string) error {
	if err := orderClaimScript.Run(ctx, g.rdb, []string{orderKey(orderID)}, "unclaim", code, claimTTL.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("gate: unclaim %s for %s: %w", orderID, code, err)
	}
	return nil
}

// OrderOwner reads which voucher holds the claim on an orderId (ok is false
// when none does) and the run_id of the Redis server it was read on.
func (g *Gate) OrderOwner(ctx context.Context, orderID string) (owner string, ok bool, server string, err error) {
	reply, err := orderClaimScript.Run(ctx, g.rdb, []string{orderKey(orderID)}, "read", "", 0).StringSlice()
	if err == nil && len(reply) != 2 {
		err = fmt.Errorf("unexpected reply %q", reply)
	}
	if err != nil {
		return "", false, "", fmt.Errorf("gate: claim of %s: %w", orderID, err)
	}
	return reply[0], reply[0] != "", reply[1], nil
}

// releasedChannel carries the codes of vouchers a use was given back to, so
// every instance drops its sold-out snapshot of them at once. The scripts
// that give a use back or rebuild a gate (release.lua, admission.lua,
// load.lua) publish on it themselves, with the change.
const releasedChannel = "voucher:released"

// AnnounceReleased publishes that a use of the voucher was given back (or
// its total raised) by a change no script announces.
func (g *Gate) AnnounceReleased(ctx context.Context, code string) error {
	if err := g.rdb.Publish(ctx, releasedChannel, code).Err(); err != nil {
		return fmt.Errorf("gate: announce a release on %s: %w", code, err)
	}
	return nil
}

// ListenReleased calls lapsed with the code of every voucher a use was
// given back to, announced by any instance, until ctx ends. go-redis
// subscribes again after a lost connection; announcements made meanwhile
// are missed, so every (re)subscription calls lapsedAll: a snapshot taken
// before it may be stale.
func (g *Gate) ListenReleased(ctx context.Context, lapsed func(code string), lapsedAll func()) {
	sub := g.rdb.Subscribe(ctx, releasedChannel)
	defer func() { _ = sub.Close() }()
	ch := sub.ChannelWithSubscriptions()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			switch m := m.(type) {
			case *redis.Subscription:
				lapsedAll()
			case *redis.Message:
				lapsed(m.Payload)
			}
		}
	}
}

var endScript = redis.NewScript(lua.End)

// End closes the voucher's window at the gate now, so no instance admits
// another reserve of it; nothing happens to a gate that holds no window.
func (g *Gate) End(ctx context.Context, code string) error {
	if err := endScript.Run(ctx, g.rdb, []string{keysOf(code).meta}).Err(); err != nil {
		return fmt.Errorf("gate: end %s: %w", code, err)
	}
	return nil
}
