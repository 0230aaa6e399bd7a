package testredis

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voucherd/internal/testenv"
)

// StartReplica runs a redis-server that replicates master (`--replicaof`),
// waits until its first sync is done, and stops it when the test ends. With
// Detach and Promote a test makes a replica that lags and then fails over to
// it: a master whose newest writes are lost, as in a real failover.
func StartReplica(t testing.TB, master *Server) *Server {
	t.Helper()
	testenv.SkipShort(t)
	host, port, _ := net.SplitHostPort(master.Addr)
	s, err := Launch("--replicaof", host, port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	s.master = master
	s.WaitSynced(t)
	return s
}

// WaitSynced waits (at most 10 s) until the replica has everything its
// master wrote so far: the master's WAIT for one replica's acknowledgement of
// its replication offset, after the replica's link is up.
func (s *Server) WaitSynced(t testing.TB) {
	t.Helper()
	if s.master == nil {
		t.Fatal("testredis: WaitSynced on a server that is not a replica")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		info, err := s.info(ctx, "replication")
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testredis: replica %s never synced with %s: %s (%v)", s.Addr, s.master.Addr, info, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	m := redis.NewClient(&redis.Options{Addr: s.master.Addr, MaxRetries: -1})
	defer m.Close()
	n, err := m.Do(ctx, "WAIT", 1, 10000).Int()
	if err != nil || n < 1 {
		t.Fatalf("testredis: WAIT for replica %s = %d, %v", s.Addr, n, err)
	}
}

// Detach cuts the replica off from its master without promoting it: it
// keeps what it has, stays read-only, and receives nothing more (it is
// pointed at a local listener that hangs up on every connection). From now
// on it lags behind every write to the master.
func (s *Server) Detach(t testing.TB) {
	t.Helper()
	if s.master == nil {
		t.Fatal("testredis: Detach on a server that is not a replica")
	}
	s.detachOnce.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		s.nowhere = ln.Addr().(*net.TCPAddr).Port
	})
	if err := s.do(t, "REPLICAOF", "127.0.0.1", strconv.Itoa(s.nowhere)); err != nil {
		t.Fatalf("testredis: detach replica %s: %v", s.Addr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		if info, err := s.info(ctx, "replication"); err == nil && strings.Contains(info, "master_port:"+strconv.Itoa(s.nowhere)) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testredis: replica %s did not leave its master", s.Addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Promote makes the replica a master (`REPLICAOF NO ONE`) with the data it
// has: what a failover does.
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	if err := s.do(t, "REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatalf("testredis: promote %s: %v", s.Addr, err)
	}
	s.master = nil
}

// Keys counts the server's keys (DBSIZE of database 0).
func (s *Server) Keys(t testing.TB) int64 {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (s *Server) do(t testing.TB, args ...any) error {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Err()
}

func (s *Server) info(ctx context.Context, section string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	return c.Info(ctx, section).Result()
}

// Proxy is a TCP proxy in front of a Redis (or anything): a service whose
// REDIS_URL is the proxy's URL can be switched to another server at run
// time, as a failover's DNS name or virtual address would be.
type Proxy struct {
	Addr string // 127.0.0.1:port
	URL  string // redis://Addr/0

	ln net.Listener
	mu sync.Mutex
	to string
	// every open connection, client and upstream side, cut by SwitchTo
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartProxy listens on a free port and forwards every connection to target
// (host:port); it is closed when the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), ln: ln, to: target, conns: map[net.Conn]struct{}{}}
	p.URL = "redis://" + p.Addr + "/0"
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Target is where new connections go.
func (p *Proxy) Target() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.to
}

// SwitchTo sends new connections to target and cuts every open one, so
// clients reconnect there (commands in flight fail, as in a failover).
func (p *Proxy) SwitchTo(target string) {
	p.mu.Lock()
	p.to = target
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.SwitchTo("")
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.pipe(c)
	}
}

func (p *Proxy) pipe(client net.Conn) {
	defer p.wg.Done()
	to := p.Target()
	var up net.Conn
	var err error
	if to != "" {
		up, err = net.DialTimeout("tcp", to, 2*time.Second)
	}
	if to == "" || err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.to != to { // switched while dialling
		p.mu.Unlock()
		client.Close()
		up.Close()
		return
	}
	p.conns[client], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, client)
	go cp(client, up)
	<-done
	client.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, up)
	p.mu.Unlock()
}

func (p *Proxy) String() string { return fmt.Sprintf("proxy %s -> %s", p.Addr, p.Target()) }
