// Package testredis starts throwaway redis-server processes for tests, so a
// test that flushes, restarts or clusters Redis never touches a shared one
// (such as the machine's Redis at 127.0.0.1:6379).
package testredis

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// The binaries the harness runs; the tests of this project expect them there.
const (
	ServerBinary = "/usr/bin/redis-server"
	CLIBinary    = "/usr/bin/redis-cli"
)

// Server is one redis-server process of a test, with no persistence, in its
// own temporary directory.
type Server struct {
	Addr string // host:port
	URL  string // redis://host:port/0

	port  int
	dir   string
	extra []string // more redis-server arguments, kept for Restart

	master     *Server // the server this one replicates, until promoted
	detachOnce sync.Once
	nowhere    int // a port that hangs up: where a detached replica "replicates" from

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

// Start runs a redis-server on a free port and stops it, removing its
// directory, when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	testenv.SkipShort(t)
	s, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Launch runs a redis-server on a free port for callers without a testing.TB
// (a TestMain); they must call Stop.
func Launch(extra ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "testredis-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 { // a free port may be taken before redis-server binds it
		port, err := freePort()
		if err != nil {
			last = err
			continue
		}
		s := &Server{port: port, dir: dir, extra: extra}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.URL = "redis://" + s.Addr + "/0"
		if last = s.run(); last == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir) // a temporary directory
	return nil, last
}

// Restart stops the server and starts it again on the same port; with no
// persistence it comes back empty, as a crashed cache would.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.kill()
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
}

// Stop ends the server and removes its directory; calling it again does nothing.
func (s *Server) Stop() {
	s.kill()
	_ = os.RemoveAll(s.dir)
}

func (s *Server) run() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.dir,
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
	}, s.extra...)
	cmd := exec.Command(ServerBinary, args...)
	log := new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testredis: start %s: %w", ServerBinary, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // killed on purpose: its exit status says nothing
	s.mu.Lock()
	s.cmd, s.done, s.log = cmd, done, log
	s.mu.Unlock()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if ping(s.Addr) == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("testredis: redis-server on port %d exited:\n%s", s.port, log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("testredis: redis-server on port %d did not answer PING:\n%s", s.port, log)
		}
	}
}

func (s *Server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill() // it may have exited already
	<-s.done
	s.cmd = nil
}

// ping sends a PING in the inline protocol, needing no client library.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("testredis: PING answered %q", line)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Cluster is a Redis Cluster of three masters and no replicas, each a Server.
type Cluster struct {
	Nodes []*Server
	Addrs []string // the masters' host:port
	// URL names every master in go-redis's cluster URL form:
	// redis://host1:port1?addr=host2:port2&addr=host3:port3.
	URL string
}

// StartCluster runs three cluster-enabled redis-servers, joins them with
// redis-cli --cluster create, waits until every node reports cluster_state:ok,
// and stops them when the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	testenv.SkipShort(t)
	c := &Cluster{}
	for range 3 {
		bus, err := freePort() // the default bus port (port+10000) may be taken
		if err != nil {
			t.Fatal(err)
		}
		s, err := Launch(
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "5000",
		)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
		c.Nodes = append(c.Nodes, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	c.URL = "redis://" + c.Addrs[0] + "?addr=" + c.Addrs[1] + "&addr=" + c.Addrs[2]

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, CLIBinary, args...).CombinedOutput(); err != nil {
		t.Fatalf("testredis: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range c.Addrs {
		for !clusterOK(ctx, addr) {
			select {
			case <-ctx.Done():
				t.Fatalf("testredis: cluster node %s never reported cluster_state:ok", addr)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return c
}

// clusterOK reports whether a node sees the whole cluster: state ok, all
// slots served and all three masters known.
func clusterOK(ctx context.Context, addr string) bool {
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.CommandContext(ctx, CLIBinary, "-h", host, "-p", port, "cluster", "info").Output()
	if err != nil {
		return false
	}
	info := string(out)
	return strings.Contains(info, "cluster_state:ok") &&
		strings.Contains(info, "cluster_slots_ok:16384") &&
		strings.Contains(info, "cluster_known_nodes:3")
}
