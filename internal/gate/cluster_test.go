package gate_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"voucherd/internal/testredis"
	"voucherd/internal/voucher"
)

func TestGate_OnACluster(t *testing.T) {
	t.Parallel()
	c := testredis.StartCluster(t)
	urls := map[string]string{
		"go-redis form":      c.URL,
		"redis+cluster form": "redis+cluster://" + strings.Join(c.Addrs, ","),
	}
	for name, url := range urls {
		t.Run(name, func(t *testing.T) {
			g, rdb := gateAt(t, url)
			ctx := context.Background()
			nodes := map[string]bool{}
			// Enough vouchers that their slots land on every master.
			for i := range 12 {
				code := newCode(t)
				prefix := "voucher:{" + code + "}:"
				slot, err := rdb.ClusterKeySlot(ctx, prefix+"stock").Result()
				if err != nil {
					t.Fatal(err)
				}
				for _, suffix := range []string{"customers", "orders", "meta", "paused", "load:0123456789abcdef:orders"} {
					if s, err := rdb.ClusterKeySlot(ctx, prefix+suffix).Result(); err != nil || s != slot {
						t.Fatalf("CLUSTER KEYSLOT %s = %d, %v; want %d, the stock key's slot", prefix+suffix, s, err, slot)
					}
				}
				if shards, err := rdb.ClusterShards(ctx).Result(); err == nil {
					for _, sh := range shards {
						for _, r := range sh.Slots {
							if slot >= r.Start && slot <= r.End {
								nodes[sh.Nodes[0].Endpoint+":"+strconv.FormatInt(sh.Nodes[0].Port, 10)] = true
							}
						}
					}
				}

				orders := 3
				if i == 0 {
					orders = 4500 // staged in chunks
				}
				want := bigSnapshot(code, 2, orders, "c")
				load(t, g, want)
				if loaded, err := g.Load(ctx, snapshot(code, 99, 1)); err != nil || loaded {
					t.Fatalf("a second Load = %v, %v; want false, nil", loaded, err)
				}
				if diff := cmp.Diff(want, snapshotOf(t, g, code)); diff != "" {
					t.Fatalf("Snapshot (-want +got):\n%s", diff)
				}
				reserve(t, g, 2, req(code, "new1", 1_000_001, 100), voucher.GateAdmitted)
				reserve(t, g, 2, req(code, "new1", 1_000_001, 100), voucher.GateDuplicate)
				reserve(t, g, 2, req(code, "new2", 1_000_002, 100), voucher.GateAdmitted)
				reserve(t, g, 2, req(code, "new3", 1_000_003, 100), voucher.GateOutOfStock)
				release(t, g, code, "new1", true)
				release(t, g, code, "new1", false)
				reserve(t, g, 2, req(code, "new1", 1_000_001, 100), voucher.GateReleased)
				if n, _, err := g.Lower(ctx, code, 5, version(t, g, code)); err != nil || n != 0 {
					t.Fatalf("Lower = %d, %v; want 0, nil", n, err)
				}
				if err := g.Pause(ctx, code, 0); err != nil {
					t.Fatal(err)
				}
				reserve(t, g, 2, req(code, "new3", 1_000_003, 100), voucher.GatePaused)
				if err := g.Replace(ctx, snapshot(code, 1, 1)); err != nil {
					t.Fatal(err)
				}
				reserve(t, g, 1, req(code, "new3", 1_000_003, 100), voucher.GateAdmitted)
				if err := g.Unload(ctx, code); err != nil {
					t.Fatal(err)
				}
				reserve(t, g, 1, req(code, "new4", 1_000_004, 100), voucher.GateNotLoaded)
			}
			// The kafka-mode scripts on a voucher of the cluster.
			kafkaLifecycle(t, g, newCode(t))
			// A crowd on several vouchers at once, auto-pipelined to their
			// masters.
			if !g.AutoPipelined() {
				t.Error("the cluster's gate does not auto-pipeline")
			}
			crowd(t, g, []string{newCode(t), newCode(t), newCode(t), newCode(t)}, nil)
			if len(nodes) < 2 {
				t.Errorf("the vouchers landed on %d master(s); want them spread over the cluster", len(nodes))
			}
		})
	}
}
