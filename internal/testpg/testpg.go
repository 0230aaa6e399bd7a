// Package testpg runs a throwaway PostgreSQL cluster for a test that needs
// PostgreSQL to stop and come back (a database down mid-sale), so such a
// test never touches the machine's shared cluster on 5432. The cluster lives
// in a temporary directory, listens on 127.0.0.1 on a free port with trust
// authentication, has the role and database voucher, and is removed when
// the test ends.
//
// PostgreSQL refuses to run as root, so when the test runs as root the
// cluster's programs run as the OS user postgres.
package testpg

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/testenv"
)

// Cluster is one PostgreSQL cluster of a test.
type Cluster struct {
	Port int
	// URL is the voucher database as the voucher role:
	// postgres://voucher@127.0.0.1:PORT/voucher?sslmode=disable.
	URL string

	bin  string // the directory of initdb and pg_ctl
	dir  string // parent of data/, the socket and the log
	cred *syscall.Credential
	mu   sync.Mutex
	up   bool
}

// Start initialises a cluster, starts it and creates the voucher role and
// database. It is stopped and removed when the test ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	testenv.SkipShort(t)
	bin, err := binDir()
	if err != nil {
		t.Fatalf("testpg: %v (scripts/setup.sh installs PostgreSQL)", err)
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("testpg: running as root needs the OS user postgres: %v", err)
		}
		// Ids are 32-bit on Linux: parsed as such, they cannot wrap.
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if c.dir, err = os.MkdirTemp("", "testpg-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.remove)
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := c.run(2*time.Minute, "initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"); err != nil {
		t.Fatalf("testpg: initdb: %v\n%s", err, out)
	}
	var lastErr error
	for range 5 { // a free port may be taken before PostgreSQL binds it
		c.Port = freePort(t)
		if lastErr = c.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatal(lastErr)
	}
	c.URL = fmt.Sprintf("postgres://voucher@127.0.0.1:%d/voucher?sslmode=disable", c.Port)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port))
	if err != nil {
		t.Fatalf("testpg: connect as postgres: %v", err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`CREATE ROLE voucher LOGIN`, `CREATE DATABASE voucher OWNER voucher`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("testpg: %s: %v", q, err)
		}
	}
	return c
}

// Stop stops the cluster the quick way (pg_ctl -m fast: connections are cut,
// as when a database goes away under a service); Start brings it back on the
// same port with the same data.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	if err := c.stop("fast"); err != nil {
		t.Fatal(err)
	}
}

// Crash stops the cluster as a crash would (pg_ctl -m immediate: no
// checkpoint; the next start recovers from the WAL).
func (c *Cluster) Crash(t testing.TB) {
	t.Helper()
	if err := c.stop("immediate"); err != nil {
		t.Fatal(err)
	}
}

// Freeze stops the cluster's processes where they stand (SIGSTOP of the
// postmaster and every backend): connections stay open and nothing answers,
// as a database stalled by its disk or a network partition. thaw (also run
// at cleanup) lets them go on.
func (c *Cluster) Freeze(t testing.TB) (thaw func()) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var postmaster int
	if _, err := fmt.Sscanf(string(b), "%d", &postmaster); err != nil || postmaster <= 0 {
		t.Fatalf("testpg: postmaster.pid: %q", b)
	}
	pids := append(childrenOf(postmaster), postmaster)
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Logf("testpg: SIGSTOP %d: %v", pid, err)
		}
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// childrenOf lists the processes whose parent is pid (from /proc).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var child int
		if _, err := fmt.Sscanf(e.Name(), "%d", &child); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		var state string
		var ppid int
		if _, err := fmt.Sscanf(string(stat[i+1:]), " %s %d", &state, &ppid); err == nil && ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// Start starts a stopped cluster again on its port.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	if err := c.start(); err != nil {
		t.Fatal(err)
	}
}

// Running reports whether the cluster was started and not stopped.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.up
}

func (c *Cluster) data() string    { return filepath.Join(c.dir, "data") }
func (c *Cluster) logFile() string { return filepath.Join(c.dir, "postgres.log") }

func (c *Cluster) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.up {
		return nil
	}
	// Only TCP on 127.0.0.1, the socket in the cluster's own directory (not
	// the shared cluster's /var/run/postgresql), and no fsync: a test's data
	// need not survive a power cut, only a stop.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60", c.Port, c.dir)
	out, err := c.run(time.Minute, "pg_ctl", "-D", c.data(), "-l", c.logFile(), "-o", opts, "-w", "-t", "50", "start")
	if err != nil {
		log, _ := os.ReadFile(c.logFile())
		return fmt.Errorf("testpg: pg_ctl start on port %d: %v\n%s\n%s", c.Port, err, out, tailOf(log, 4096))
	}
	c.up = true
	return nil
}

func (c *Cluster) stop(mode string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.up {
		return nil
	}
	out, err := c.run(time.Minute, "pg_ctl", "-D", c.data(), "-m", mode, "-w", "-t", "50", "stop")
	if err != nil {
		return fmt.Errorf("testpg: pg_ctl stop: %v\n%s", err, out)
	}
	c.up = false
	return nil
}

func (c *Cluster) remove() {
	if err := c.stop("immediate"); err != nil {
		// Last resort: the postmaster's pid is the first line of postmaster.pid.
		if b, rerr := os.ReadFile(filepath.Join(c.data(), "postmaster.pid")); rerr == nil {
			var pid int
			if _, serr := fmt.Sscanf(string(b), "%d", &pid); serr == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	os.RemoveAll(c.dir)
}

// run runs one of the cluster's programs, as postgres when we are root.
func (c *Cluster) run(timeout time.Duration, prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...)
	cmd.Dir = c.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C.UTF-8", "HOME=" + c.dir}
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// binDir finds the newest installed PostgreSQL server's programs.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no /usr/lib/postgresql/<version>/bin/pg_ctl")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tailOf(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Dirs are the directories the cluster keeps on disk (removed at cleanup).
func (c *Cluster) Dirs() []string { return []string{c.dir} }
