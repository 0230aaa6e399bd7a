package gate

import (
	"context"
	"strings"
	"testing"

	"voucherd/internal/testredis"
)

// A staged chunk that expired before the commit must fail the load rather
// than install half a gate.
func TestLoad_MissingStagedChunkLoadsNothing(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	rdb, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	k := keysOf("HALF")
	keys := []string{k.stock, k.customers, k.orders, k.meta, k.prefix + "load:t:customers", k.prefix + "load:t:orders", k.paused,
		k.codes, k.orderCodes, k.prefix + "load:t:codes", k.prefix + "load:t:ordercodes"}
	// Claims 2000 staged orders that are not there.
	err = loadScript.Run(ctx, rdb, keys, "load", 10, 1, 0, 0, 2000, 1, "7", "1", "o1", "7:100").Err()
	if err == nil || !strings.Contains(err.Error(), "staged chunks are missing") {
		t.Fatalf("load with a missing chunk: %v; want the staged-chunks error", err)
	}
	if n, _ := rdb.Exists(ctx, k.stock, k.customers, k.orders, k.meta).Result(); n != 0 {
		t.Errorf("a failed load left %d keys", n)
	}
}

func TestSplit_ChunksKeepEveryEntryOnce(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, chunkSize, chunkSize + 1, 3*chunkSize + 5} {
		customers := make([]entry, n/2)
		orders := make([]entry, n-n/2)
		chunks := split(customers, orders)
		gotC, gotO := 0, 0
		for i, c := range chunks {
			if size := len(c.customers) + len(c.orders); size > chunkSize || (size == 0 && n > 0) {
				t.Errorf("%d entries: chunk %d holds %d", n, i, size)
			}
			gotC += len(c.customers)
			gotO += len(c.orders)
		}
		if gotC != len(customers) || gotO != len(orders) {
			t.Errorf("%d entries: chunks hold %d customers and %d orders; want %d and %d", n, gotC, gotO, len(customers), len(orders))
		}
	}
}
