package gate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

// pipelineCounter is a go-redis hook recording the most scripts the client
// sent in one pipeline, to see that the auto-pipeliner did coalesce callers.
type pipelineCounter struct{ longest atomic.Int64 }

func (*pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var n int64
		for _, c := range cmds {
			if c.Name() == "evalsha" || c.Name() == "eval" {
				n++
			}
		}
		for {
			l := p.longest.Load()
			if n <= l || p.longest.CompareAndSwap(l, n) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

// evalCounter is a go-redis hook counting the EVALs sent while on is set.
type evalCounter struct {
	on *atomic.Bool
	n  *atomic.Int64
}

func (e evalCounter) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if c.Name() == "eval" && e.on.Load() {
			e.n.Add(1)
		}
	}
}

func (evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (e evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { e.count(cmd); return next(ctx, cmd) }
}
func (e evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { e.count(cmds...); return next(ctx, cmds) }
}

// crowd runs a flash sale's crowd against a gate: on each of the codes (50
// uses, one per customer), 400 orders of which 100 are sent twice, all at
// once; then every order again. Exactly 50 orders per voucher pass, a copy
// of a passed order is DUPLICATE, every other answer OUT_OF_STOCK, and the
// gate holds exactly the passed orders. flush, when set, runs while the
// first wave is in flight.
func crowd(t *testing.T, g *gate.Gate, codes []string, flush func()) {
	t.Helper()
	ctx := context.Background()
	const uses, orders, twice = 50, 400, 100
	for _, code := range codes {
		load(t, g, snapshot(code, uses, 1))
	}
	type call struct {
		r voucher.ReserveRequest
		v voucher.GateVerdict
	}
	wave := func() []call {
		var calls []call
		for _, code := range codes {
			for i := range orders {
				r := req(code, fmt.Sprintf("o%d", i), int64(1_000_000+i), 100)
				calls = append(calls, call{r: r})
				if i < twice {
					calls = append(calls, call{r: r})
				}
			}
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				<-start
				v, err := g.Reserve(ctx, calls[i].r.Code, 1, 0, calls[i].r)
				if err != nil {
					t.Errorf("Reserve(%s, %s): %v", calls[i].r.Code, calls[i].r.OrderID, err)
				}
				calls[i].v = v
			})
		}
		if flush != nil {
			wg.Go(func() { <-start; flush() })
		}
		close(start)
		wg.Wait()
		return calls
	}

	passed := map[string]map[string]bool{} // code -> orderIds admitted
	first := wave()
	if t.Failed() {
		t.FailNow()
	}
	// By code and order: a request with the same two is the same request.
	type order struct{ code, orderID string }
	seen := map[order][]voucher.GateVerdict{}
	reqs := map[order]voucher.ReserveRequest{}
	for _, c := range first {
		k := order{c.r.Code, c.r.OrderID}
		seen[k] = append(seen[k], c.v)
		reqs[k] = c.r
	}
	for k, vs := range seen {
		r := reqs[k]
		if passed[r.Code] == nil {
			passed[r.Code] = map[string]bool{}
		}
		admitted := 0
		for _, v := range vs {
			switch v {
			case voucher.GateAdmitted:
				admitted++
			case voucher.GateDuplicate, voucher.GateOutOfStock:
			default:
				t.Errorf("%s on %s: %s", r.OrderID, r.Code, v)
			}
		}
		// A pair is ADMITTED and DUPLICATE, or OUT_OF_STOCK twice.
		switch {
		case admitted == 1:
			passed[r.Code][r.OrderID] = true
			for _, v := range vs {
				if v != voucher.GateAdmitted && v != voucher.GateDuplicate {
					t.Errorf("%s on %s, admitted once: answers %v", r.OrderID, r.Code, vs)
				}
			}
		case admitted > 1:
			t.Errorf("%s on %s admitted %d times", r.OrderID, r.Code, admitted)
		default:
			for _, v := range vs {
				if v != voucher.GateOutOfStock {
					t.Errorf("%s on %s, never admitted: answers %v", r.OrderID, r.Code, vs)
				}
			}
		}
	}
	for _, code := range codes {
		if n := len(passed[code]); n != uses {
			t.Errorf("%s: %d orders admitted; want %d", code, n, uses)
		}
		if n := remaining(t, g, code); n != 0 {
			t.Errorf("%s: %d uses remain; want 0", code, n)
		}
		snap := snapshotOf(t, g, code)
		if len(snap.Orders) != uses {
			t.Errorf("%s: the gate holds %d orders; want %d", code, len(snap.Orders), uses)
		}
		for _, o := range snap.Orders {
			if !passed[code][o.OrderID] {
				t.Errorf("%s: the gate holds %s, which was not admitted", code, o.OrderID)
			}
		}
	}

	// The retries: the winners are DUPLICATE, the rest still OUT_OF_STOCK.
	flush = nil
	for _, c := range wave() {
		want := voucher.GateOutOfStock
		if passed[c.r.Code][c.r.OrderID] {
			want = voucher.GateDuplicate
		}
		if c.v != want {
			t.Errorf("retry of %s on %s = %s; want %s", c.r.OrderID, c.r.Code, c.v, want)
		}
	}
}

func TestGate_AutoPipelinedCrowd(t *testing.T) {
	t.Parallel()
	rdb, err := gate.NewClient(shared.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	var pipes pipelineCounter
	rdb.AddHook(&pipes)
	g := gate.New(rdb)
	if !g.AutoPipelined() {
		t.Fatal("the gate does not auto-pipeline by default")
	}
	// Several vouchers: one voucher's reserves go in at most
	// reserveWorkers (2) scripts at a time, each a batch of up to 128, so a
	// crowd of one voucher is a few scripts that a loaded machine may send
	// one after the other (CI once saw no pipeline at all); other vouchers'
	// scripts share the pipeline.
	crowd(t, g, []string{newCode(t), newCode(t), newCode(t), newCode(t)}, nil)
	if n := pipes.longest.Load(); n < 2 {
		t.Errorf("the longest pipeline held %d script(s); want the crowd's scripts coalesced", n)
	}
}

func TestGate_WithoutAutoPipelineCrowd(t *testing.T) {
	t.Parallel()
	rdb, err := gate.NewClient(shared.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	var pipes pipelineCounter
	rdb.AddHook(&pipes)
	g := gate.New(rdb, gate.WithAutoPipeline(false))
	if g.AutoPipelined() {
		t.Fatal("WithAutoPipeline(false) auto-pipelines")
	}
	crowd(t, g, []string{newCode(t)}, nil)
	if n := pipes.longest.Load(); n != 0 {
		t.Errorf("a pipeline of %d script(s) was sent; want none", n)
	}
}

// A SCRIPT FLUSH while a crowd's scripts are queued and in flight: every
// EVALSHA that meets NOSCRIPT is sent again as EVAL, through the pipeliner,
// and no caller sees it.
func TestGate_AutoPipelinedCrowdSurvivesScriptFlush(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	g, rdb := gateAt(t, srv.URL)
	// Counts the EVALs sent once the crowd runs (the loads before it meet
	// NOSCRIPT too, on a new server).
	var crowding atomic.Bool
	var evals atomic.Int64
	rdb.AddHook(evalCounter{&crowding, &evals})
	flushes := 0
	crowd(t, g, []string{newCode(t), newCode(t)}, func() {
		crowding.Store(true)
		for range 5 {
			if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
				t.Error(err)
				return
			}
			flushes++
			time.Sleep(2 * time.Millisecond)
		}
	})
	if flushes != 5 {
		t.Errorf("%d SCRIPT FLUSH; want 5", flushes)
	}
	if evals.Load() == 0 {
		t.Error("no reserve met NOSCRIPT; the flushes missed the crowd")
	}
}

// The order claim rides the pipeliner too: concurrent claims of one orderId
// for several vouchers leave exactly one owner, and every caller is told it.
func TestGate_AutoPipelinedClaims(t *testing.T) {
	t.Parallel()
	g, _ := newGate(t)
	ctx := context.Background()
	const orders, vouchers = 100, 5
	codes := make([]string, vouchers)
	for i := range codes {
		codes[i] = newCode(t)
	}
	prefix := newCode(t)
	owners := make([][]string, orders)
	var wg sync.WaitGroup
	for o := range orders {
		owners[o] = make([]string, vouchers)
		for v := range vouchers {
			wg.Go(func() {
				owner, _, err := g.ClaimOrder(ctx, fmt.Sprintf("%s-%d", prefix, o), codes[v])
				if err != nil {
					t.Errorf("ClaimOrder: %v", err)
				}
				owners[o][v] = owner
			})
		}
	}
	wg.Wait()
	for o := range orders {
		id := fmt.Sprintf("%s-%d", prefix, o)
		held, ok, _, err := g.OrderOwner(ctx, id)
		if err != nil || !ok {
			t.Fatalf("OrderOwner(%s) = %v, %v", id, ok, err)
		}
		for v, owner := range owners[o] {
			if owner != held {
				t.Errorf("claim of %s for %s answered %q; the claim is %q", id, codes[v], owner, held)
			}
		}
	}
}
