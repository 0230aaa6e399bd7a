package testredis_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testredis"
)

func TestStart_RestartLosesDataAndKeepsThePort(t *testing.T) {
	t.Parallel()
	s := testredis.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr := s.Addr
	s.Restart(t)
	if s.Addr != addr {
		t.Errorf("Restart moved the server from %s to %s", addr, s.Addr)
	}
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("EXISTS k after Restart = %d, %v; want 0, nil", n, err)
	}
}

func TestStop_EndsTheServerAndRemovesItsDirectory(t *testing.T) {
	t.Parallel()
	s, err := testredis.Launch()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	dir, err := rdb.ConfigGet(ctx, "dir").Result()
	if err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop() // a second Stop does nothing
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Error("the server still answers after Stop")
	}
	if _, err := os.Stat(dir["dir"]); !os.IsNotExist(err) {
		t.Errorf("the directory %s survived Stop: %v", dir["dir"], err)
	}
}

func TestStartCluster_ServesEverySlot(t *testing.T) {
	t.Parallel()
	c := testredis.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	defer rdb.Close()
	ctx := context.Background()
	for _, key := range []string{"a", "b", "c", "d", "e", "f"} { // spread over the masters
		if err := rdb.Set(ctx, key, key, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
	}
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil || len(shards) != 3 {
		t.Fatalf("CLUSTER SHARDS = %d shards, %v; want 3", len(shards), err)
	}
}
