// Package testpostgres starts a throwaway PostgreSQL cluster for tests, so a
// test that stops or restarts the database never touches a shared one (such
// as the machine's PostgreSQL at 127.0.0.1:5432).
package testpostgres

import (
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
	"testing"
)

// Server is one PostgreSQL cluster of a test in its own temporary directory,
// with fsync off and trust authentication for the role voucher.
type Server struct {
	// URL reaches the database voucher as the role voucher.
	URL  string
	Port int

	bin     string // the directory of initdb, pg_ctl and postgres
	dir     string
	data    string
	asUser  string // the user the cluster runs as ("" for this process's)
	mu      sync.Mutex
	running bool
}

// Start initialises and starts a cluster on a free port, and removes it when
// the test ends. It skips nothing: a machine without PostgreSQL's binaries
// fails the test.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Remove)
	return s
}

// Launch is Start for callers without a testing.TB; they must call Remove.
func Launch() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "testpostgres-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	// PostgreSQL refuses to run as root: run it as the postgres user then.
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no postgres user to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s.asUser = "postgres"
	}
	if out, err := s.run("initdb", "-D", s.data, "-U", "voucher", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	var last error
	for range 5 { // a free port may be taken before postgres binds it
		if s.Port, last = freePort(); last != nil {
			continue
		}
		if last = s.Restart(); last == nil {
			break
		}
	}
	if last != nil {
		os.RemoveAll(dir)
		return nil, last
	}
	admin := fmt.Sprintf("postgres://voucher@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
	if out, err := exec.Command(filepath.Join(s.bin, "psql"), admin, "-qc", "CREATE DATABASE voucher").CombinedOutput(); err != nil {
		s.Remove()
		return nil, fmt.Errorf("create database: %v: %s", err, out)
	}
	s.URL = fmt.Sprintf("postgres://voucher@127.0.0.1:%d/voucher?sslmode=disable", s.Port)
	return s, nil
}

// Stop shuts the cluster down at once (immediate mode: connections are cut,
// as in a crash). The port stays the cluster's for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return
	}
	_, _ = s.run("pg_ctl", "-D", s.data, "-m", "immediate", "-w", "stop")
	s.running = false
}

// Restart starts the stopped cluster again on its port.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c max_connections=40", s.Port, s.dir)
	if out, err := s.run("pg_ctl", "-D", s.data, "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	s.running = true
	return nil
}

// Remove stops the cluster and deletes its directory.
func (s *Server) Remove() {
	s.Stop()
	_ = os.RemoveAll(s.dir)
}

func (s *Server) run(tool string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, tool)
	var cmd *exec.Cmd
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// binDir finds PostgreSQL's server binaries: PG_BINDIR, else the newest
// Debian /usr/lib/postgresql/N/bin.
func binDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb) under /usr/lib/postgresql; set PG_BINDIR")
}

func version(dir string) int {
	n, _ := strconv.Atoi(strings.Split(strings.TrimPrefix(dir, "/usr/lib/postgresql/"), "/")[0])
	return n
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
