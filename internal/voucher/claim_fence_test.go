package voucher

import (
	"context"
	"sync/atomic"
	"testing"
)

// A claim read on a Redis server is trusted without waiting only once the
// process has seen that server and settled every event published before:
// a server first seen (a failover, a restart) is not, nor one whose settle
// failed, nor "" (Redis did not answer). A refusal's rule 2 waits for the
// fence before it trusts "no claim" (kafkaFlash.heldAfterFence).
func TestClaimFence_ANewServerIsTrustedOnlyAfterASettle(t *testing.T) {
	ctx := context.Background()
	var settles atomic.Int64
	fail := atomic.Bool{}
	f := newClaimFence(func(context.Context) error {
		settles.Add(1)
		if fail.Load() {
			return context.DeadlineExceeded
		}
		return nil
	})
	if f.trusted("a") {
		t.Fatal("a server never seen is trusted")
	}
	if err := f.wait(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if !f.trusted("a") {
		t.Error("a server settled after it was first seen is not trusted")
	}
	if f.trusted("") {
		t.Error(`"" (no server answered) is trusted`)
	}
	fail.Store(true)
	if f.trusted("b") {
		t.Error("a second server, never seen, is trusted")
	}
	if err := f.wait(ctx, "b"); err == nil {
		t.Error("the fence of a server whose settle failed let a claim through")
	}
	if f.trusted("b") {
		t.Error("a server whose settle failed is trusted")
	}
	if n := settles.Load(); n != 2 {
		t.Errorf("%d settles, want one per new server (2)", n)
	}
}
