package gate_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"voucherd/internal/gate"
)

func TestNewClient_URLForms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc        string
		url         string
		wantCluster bool
		wantAddrs   []string
		wantRead    time.Duration
	}{
		{desc: "redis:// is one node", url: "redis://127.0.0.1:6390/2",
			wantAddrs: []string{"127.0.0.1:6390"}, wantRead: 500 * time.Millisecond},
		{desc: "a query setting wins over the default", url: "redis://127.0.0.1:6390/0?read_timeout=2s",
			wantAddrs: []string{"127.0.0.1:6390"}, wantRead: 2 * time.Second},
		{desc: "redis+cluster:// lists the seed nodes", url: "redis+cluster://u:p@h1:7000,h2:7001,h3:7002",
			wantCluster: true, wantAddrs: []string{"h1:7000", "h2:7001", "h3:7002"}, wantRead: 500 * time.Millisecond},
		{desc: "redis+cluster:// takes query settings", url: "redis+cluster://h1:7000,h2:7001/0?pool_size=7&read_timeout=1s",
			wantCluster: true, wantAddrs: []string{"h1:7000", "h2:7001"}, wantRead: time.Second},
		{desc: "go-redis's ?addr= form is a cluster", url: "redis://h1:7000?addr=h2:7001",
			wantCluster: true, wantAddrs: []string{"h1:7000", "h2:7001"}, wantRead: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			rdb, err := gate.NewClient(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			var addrs []string
			var read time.Duration
			switch c := rdb.(type) {
			case *redis.Client:
				addrs, read = []string{c.Options().Addr}, c.Options().ReadTimeout
			case *redis.ClusterClient:
				addrs, read = c.Options().Addrs, c.Options().ReadTimeout
			}
			if _, isCluster := rdb.(*redis.ClusterClient); isCluster != tt.wantCluster {
				t.Errorf("cluster client %v; want %v", isCluster, tt.wantCluster)
			}
			if diff := cmp.Diff(tt.wantAddrs, addrs); diff != "" {
				t.Errorf("addrs (-want +got):\n%s", diff)
			}
			if read != tt.wantRead {
				t.Errorf("read timeout %v; want %v", read, tt.wantRead)
			}
		})
	}
}

func TestNewClient_RefusesWhatItCannotServe(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"localhost:6379",
		"http://localhost:6379",
		"redis+cluster://h1:7000,h2:7001/3",
		"redis://localhost:6379/0?no_such_option=1",
	} {
		if rdb, err := gate.NewClient(url); err == nil {
			rdb.Close()
			t.Errorf("NewClient(%q) accepted it", url)
		}
	}
}
