package testredis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testredis"
)

// TestReplica_DetachedReplicaLagsAndIsPromotedWithoutTheNewerWrites: a
// replica has what the master wrote before Detach and nothing after; once
// promoted it takes writes of its own.
func TestReplica_DetachedReplicaLagsAndIsPromotedWithoutTheNewerWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	master := testredis.Start(t)
	replica := testredis.StartReplica(t, master)
	m := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer m.Close()
	r := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer r.Close()

	if err := m.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	replica.WaitSynced(t)
	if v, err := r.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Fatalf("replica GET before = %q, %v; want 1", v, err)
	}

	replica.Detach(t)
	if err := m.Set(ctx, "after", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := m.Incr(ctx, "before").Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "x", "y", 0).Err(); err == nil {
		t.Error("a detached replica took a write before its promotion")
	}

	replica.Promote(t)
	if n, err := r.Exists(ctx, "after").Result(); err != nil || n != 0 {
		t.Errorf("the promoted replica has a write made after Detach: EXISTS after = %d, %v", n, err)
	}
	if v, err := r.Get(ctx, "before").Result(); err != nil || v != "1" {
		t.Errorf("the promoted replica's before = %q, %v; want the value before Detach, 1", v, err)
	}
	if err := r.Set(ctx, "x", "y", 0).Err(); err != nil {
		t.Errorf("the promoted replica refuses writes: %v", err)
	}
	if v, _ := m.Get(ctx, "before").Result(); v != "2" {
		t.Errorf("the old master's before = %q; want 2", v)
	}
}

// TestProxy_SwitchToMovesTheClientsToTheOtherServer: a client of the proxy
// reaches the first server, then after SwitchTo (its connection cut, go-redis
// reconnects) the second.
func TestProxy_SwitchToMovesTheClientsToTheOtherServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := testredis.Start(t), testredis.Start(t)
	for s, v := range map[*testredis.Server]string{a: "a", b: "b"} {
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		if err := c.Set(ctx, "who", v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	p := testredis.StartProxy(t, a.Addr)
	opts, err := redis.ParseURL(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if v, err := c.Get(ctx, "who").Result(); err != nil || v != "a" {
		t.Fatalf("through the proxy: %q, %v; want a", v, err)
	}
	p.SwitchTo(b.Addr)
	// The pooled connection was cut: go-redis retries on a new one.
	if v, err := c.Get(ctx, "who").Result(); err != nil || v != "b" {
		t.Fatalf("after SwitchTo: %q, %v; want b", v, err)
	}
}
