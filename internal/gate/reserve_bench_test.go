package gate_test

// Benchmarks of the gate's reserve call (one EVALSHA of lua/reserve.lua)
// against the throwaway redis-server of these tests, at a flash sale's
// concurrency, for the verdicts a sale is made of and for several client
// pool sizes (the server's default is 10 x GOMAXPROCS), and with the gate's
// auto-pipelining (the default) off and on:
//
//	go test -run '^$' -bench GateReserve -benchmem ./internal/gate/

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"voucherd/internal/gate"
	"voucherd/internal/voucher"
)

func benchCode(b *testing.B) string {
	b.Helper()
	p := make([]byte, 5)
	_, _ = rand.Read(p)
	return "bench-" + hex.EncodeToString(p)
}

// benchGate loads a voucher with remaining uses into a gate over a client
// with the given pool size (0: the default).
func benchGate(b *testing.B, poolSize, remaining int, opts ...gate.Option) (*gate.Gate, string) {
	b.Helper()
	url := shared.URL
	if poolSize > 0 {
		url += "?pool_size=" + strconv.Itoa(poolSize)
	}
	rdb, err := gate.NewClient(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	g, code := gate.New(rdb, opts...), benchCode(b)
	if _, err := g.Load(context.Background(), voucher.GateSnapshot{
		Code: code, Remaining: remaining, PerUserLimit: 1, Customers: map[int64]int{}, ExpireAt: time.Now().Add(time.Hour),
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = g.Unload(context.Background(), code) })
	return g, code
}

var benchOrders atomic.Int64

// benchRunReserves calls Reserve from 64 goroutines a core, each with a new
// customer and order unless repeat is set, and checks every verdict.
func benchRunReserves(b *testing.B, g *gate.Gate, code string, repeat bool, want voucher.GateVerdict) {
	benchRunReservesFrom(b, 64*runtime.GOMAXPROCS(0), g, code, repeat, want)
}

// benchRunReservesFrom is benchRunReserves from about callers goroutines
// (RunParallel starts a multiple of GOMAXPROCS).
func benchRunReservesFrom(b *testing.B, callers int, g *gate.Gate, code string, repeat bool, want voucher.GateVerdict) {
	ctx := context.Background()
	fixed := voucher.ReserveRequest{Code: code, CustomerID: 1, OrderID: code + "-fixed", OrderAmount: 25000}
	if repeat {
		if v, err := g.Reserve(ctx, code, 1, 0, fixed); err != nil || v != voucher.GateAdmitted {
			b.Fatalf("first reserve: %v %v", v, err)
		}
	}
	b.ReportAllocs()
	b.SetParallelism(max(1, callers/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := fixed
			if !repeat {
				n := benchOrders.Add(1)
				r.CustomerID, r.OrderID = 1_000_000+n, code+"-"+strconv.FormatInt(n, 10)
			}
			v, err := g.Reserve(ctx, code, 1, 0, r)
			if err != nil || v != want {
				b.Errorf("verdict %v, %v; want %v", v, err, want)
				return
			}
		}
	})
}

func BenchmarkGateReserve(b *testing.B) {
	for _, pool := range []int{0, 64, 256} {
		name := "pool=default"
		if pool > 0 {
			name = fmt.Sprintf("pool=%d", pool)
		}
		b.Run("out-of-stock/"+name, func(b *testing.B) {
			g, code := benchGate(b, pool, 0)
			benchRunReserves(b, g, code, false, voucher.GateOutOfStock)
		})
	}
	b.Run("admitted/pool=default", func(b *testing.B) {
		g, code := benchGate(b, 0, 1<<30)
		benchRunReserves(b, g, code, false, voucher.GateAdmitted)
	})
	b.Run("duplicate/pool=default", func(b *testing.B) {
		g, code := benchGate(b, 0, 1<<30)
		benchRunReserves(b, g, code, true, voucher.GateDuplicate)
	})
}

// BenchmarkGateReserveAutoPipeline is a flash sale's crowd (out of stock) and
// its winners (admitted) at 128 and 256 concurrent callers, with the hot
// scripts on the plain client and through go-redis's auto-pipeliner.
func BenchmarkGateReserveAutoPipeline(b *testing.B) {
	for _, callers := range []int{128, 256} {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("callers=%d/autopipeline=%v", callers, on)
			b.Run("out-of-stock/"+name, func(b *testing.B) {
				g, code := benchGate(b, 0, 0, gate.WithAutoPipeline(on))
				benchRunReservesFrom(b, callers, g, code, false, voucher.GateOutOfStock)
			})
			b.Run("admitted/"+name, func(b *testing.B) {
				g, code := benchGate(b, 0, 1<<30, gate.WithAutoPipeline(on))
				benchRunReservesFrom(b, callers, g, code, false, voucher.GateAdmitted)
			})
		}
	}
}
