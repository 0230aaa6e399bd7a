// Package testproc runs voucherd as separate OS processes for tests whose
// scenario is a crash: `voucherd serve` killed with SIGKILL mid-sale, a
// `voucherd broker` that outlives it. The binary is built once per test
// binary; every process listens on 127.0.0.1 on a free port, is waited for
// with a bound, is killed when its test ends, and its output is shown when
// the test fails.
package testproc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// Bounds of the waits; a process that misses one fails its test.
const (
	// StartTimeout: serve applies migrations, creates topics and warms the
	// gates before it is ready.
	StartTimeout = 60 * time.Second
	// StopTimeout bounds a SIGTERM before the process is killed.
	StopTimeout = 30 * time.Second
	// logTail is how much of a process's output a failed test shows.
	logTail = 16 << 10
)

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// Binary is the path of voucherd built from this module, once per test
// binary (without -race: the processes are the system under test, not the
// code under the race detector, and the machine is small).
//
// Every test package of one checkout builds into the same file,
// $TMPDIR/voucherd-testproc-HASH/voucherd (HASH of the go.mod's path, so
// two checkouts never run each other's binary): go build links only when
// the file's build ID is not the one the source makes, so the packages
// after the first, and the next make test, skip the 5 CPU-seconds of a link.
// A link goes to go's work directory and is renamed over the file, so a
// package running the old binary meanwhile keeps it.
func Binary(t testing.TB) string {
	t.Helper()
	testenv.SkipShort(t)
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// go test puts its own GOROOT/bin first on the PATH of the tests.
		gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		if err != nil || len(bytes.TrimSpace(gomod)) == 0 {
			buildErr = fmt.Errorf("testproc: go env GOMOD: %v (%q)", err, gomod)
			return
		}
		sum := sha256.Sum256(bytes.TrimSpace(gomod))
		buildBin = filepath.Join(os.TempDir(), "voucherd-testproc-"+hex.EncodeToString(sum[:6]), "voucherd")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", buildBin, "voucherd/cmd/voucherd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("testproc: go build voucherd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// HeldAddr is a loopback host:port the test listens on until it ends, so a
// command told to listen there fails to (and says so) instead of the test
// asking afterwards whether something listens: a port let go is another
// parallel test's to take, which once failed CI.
func HeldAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// Proc is one voucherd command run as an OS process, possibly several times
// in a row (Restart) with the same settings and port.
type Proc struct {
	Name string            // for messages: "serve", "broker", ...
	Args []string          // the command line after the binary
	Env  map[string]string // the whole environment (plus PATH and HOME)
	// Addr is the host:port the process listens on: HTTP_ADDR for serve,
	// BROKER_ADDR for broker.
	Addr string
	// URL is http://Addr for serve, empty for broker.
	URL string

	ready func(t testing.TB, p *Proc) error // waits until the process serves
	// addrKey is the setting of Addr (HTTP_ADDR, BROKER_ADDR); with
	// pickPort the first run listens on a free port of the harness's
	// choosing, another one if that was taken before the process bound it.
	addrKey  string
	pickPort bool
	freePort func(testing.TB) int // FreePort unless a test of this package sets it

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run exited
	runs    int
	cleanup bool             // the test's cleanup is registered
	last    *os.ProcessState // how the previous run ended
	log     lockedBuffer     // every run's output, runs marked
}

// Serve starts `voucherd serve` with env (DATABASE_URL, REDIS_URL, ... as
// the test wants them) on a free port unless env sets HTTP_ADDR, and waits
// until /readyz answers 200.
func Serve(t testing.TB, env map[string]string) *Proc {
	t.Helper()
	testenv.SkipShort(t)
	env = clone(env)
	p := newProc("serve", "HTTP_ADDR", env, serveReady)
	p.Start(t)
	return p
}

// Broker starts `voucherd broker` on a free port unless env sets
// BROKER_ADDR, and waits until it accepts connections. Its address is
// KAFKA_BROKERS for a Serve.
func Broker(t testing.TB, env map[string]string) *Proc {
	t.Helper()
	testenv.SkipShort(t)
	env = clone(env)
	p := newProc("broker", "BROKER_ADDR", env, brokerReady)
	p.Start(t)
	return p
}

// newProc is `voucherd command` listening on env[addrKey], or on a port of
// the harness's choosing when that is unset.
func newProc(command, addrKey string, env map[string]string, ready func(testing.TB, *Proc) error) *Proc {
	p := &Proc{Name: command, Args: []string{command}, Env: env, addrKey: addrKey, ready: ready, pickPort: env[addrKey] == ""}
	if !p.pickPort {
		p.listenOn(env[addrKey])
	}
	return p
}

// Start runs the process (again, after Kill or Stop) and waits until it is
// ready. The first Start registers the cleanup: the process is killed when
// the test ends, and its output is logged if the test failed.
func (p *Proc) Start(t testing.TB) {
	t.Helper()
	for try := 1; ; try++ {
		// A port found free may be taken (by another test's listener or an
		// outgoing connection's local port) before the process binds it: a
		// first run on a port of the harness's choosing then moves to
		// another. Later runs keep theirs: a restart is on the same address.
		picking := p.pickPort && p.runs == 0
		if picking {
			pick := p.freePort
			if pick == nil {
				pick = FreePort
			}
			p.listenOn("127.0.0.1:" + strconv.Itoa(pick(t)))
		}
		err := p.run(t)
		if err == nil {
			return
		}
		if !picking || try == 5 || !strings.Contains(p.log.lastRun(), "address already in use") {
			t.Fatalf("testproc: voucherd %s (run %d) did not become ready: %v\n%s", p.Name, p.runs, err, p.log.tail(logTail))
		}
		p.runs = 0 // the next port's run is the first again
	}
}

// listenOn sets the address the process listens on.
func (p *Proc) listenOn(addr string) {
	p.Addr = addr
	p.Env[p.addrKey] = addr
	if p.Name == "serve" {
		p.URL = "http://" + addr
	}
}

// run starts the process and waits until it is ready; one that is not is
// killed.
func (p *Proc) run(t testing.TB) error {
	t.Helper()
	bin := Binary(t)
	p.mu.Lock()
	if p.cmd != nil {
		p.mu.Unlock()
		t.Fatalf("testproc: %s is already running", p.Name)
	}
	p.runs++
	if !p.cleanup {
		p.cleanup = true
		t.Cleanup(func() {
			p.kill()
			if t.Failed() {
				t.Logf("output of voucherd %s (%s), last %d KiB:\n%s", p.Name, p.Addr, logTail>>10, p.log.tail(logTail))
			}
		})
	}
	fmt.Fprintf(&p.log, runMarker+"%s, run %d -----\n", p.Name, p.runs)
	cmd := exec.Command(bin, p.Args...)
	cmd.Env = environ(p.Env)
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	// Its own process group, so a signal meant for the test does not reach
	// it; killed if the test binary dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		t.Fatalf("testproc: start voucherd %s: %v", p.Name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()

	if err := p.ready(t, p); err != nil {
		p.kill()
		return err
	}
	return nil
}

// Kill sends SIGKILL (a crash: no shutdown, nothing flushed) and waits until
// the process is gone.
func (p *Proc) Kill(t testing.TB) {
	t.Helper()
	if !p.signal(syscall.SIGKILL) {
		t.Fatalf("testproc: voucherd %s is not running", p.Name)
	}
	p.wait(StopTimeout)
}

// Stop sends SIGTERM (a graceful shutdown) and waits for the exit; a process
// still running after StopTimeout is killed and fails the test.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	if !p.signal(syscall.SIGTERM) {
		t.Fatalf("testproc: voucherd %s is not running", p.Name)
	}
	if !p.wait(StopTimeout) {
		p.kill()
		t.Errorf("testproc: voucherd %s ignored SIGTERM for %s; killed", p.Name, StopTimeout)
	}
}

// Restart kills the process (SIGKILL) and starts it again with the same
// settings on the same port.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	p.Kill(t)
	p.Start(t)
}

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Logs is the output of every run so far.
func (p *Proc) Logs() string { return p.log.String() }

func (p *Proc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	_ = p.cmd.Process.Signal(sig)
	return true
}

// wait waits up to d for the current run to exit; true if it did.
func (p *Proc) wait(d time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
	case <-time.After(d):
		return false
	}
	p.mu.Lock()
	if p.cmd != nil {
		p.last = p.cmd.ProcessState
	}
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	return true
}

// Exited is how the last run that was stopped or killed ended (nil before).
func (p *Proc) Exited() *os.ProcessState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *Proc) kill() {
	if p.signal(syscall.SIGKILL) {
		p.wait(StopTimeout)
	}
}

// exited says why waiting is pointless: the process is gone.
func (p *Proc) exited() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return fmt.Errorf("it exited (%v)", p.cmd.ProcessState)
	default:
		return nil
	}
}

func serveReady(t testing.TB, p *Proc) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(StartTimeout)
	last := errors.New("no answer yet")
	for time.Now().Before(deadline) {
		if err := p.exited(); err != nil {
			return err
		}
		resp, err := client.Get(p.URL + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answered %d", resp.StatusCode)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %s: %v", StartTimeout, last)
}

func brokerReady(t testing.TB, p *Proc) error {
	deadline := time.Now().Add(StartTimeout)
	for time.Now().Before(deadline) {
		if err := p.exited(); err != nil {
			return err
		}
		// It prints its address once it listens.
		if strings.Contains(p.log.String(), "voucherd broker listening on "+p.Addr) {
			conn, err := net.DialTimeout("tcp", p.Addr, time.Second)
			if err == nil {
				conn.Close()
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not listening on %s within %s", p.Addr, StartTimeout)
}

// environ is the process's whole environment: env plus what a program needs
// to run (PATH, HOME), nothing else of the test's, so a TEST_* or
// DATABASE_URL of the developer's shell never leaks in.
func environ(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// lockedBuffer is the output of a process, written by its two pipes' copiers
// and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// runMarker begins the line written to a Proc's output before each run.
const runMarker = "----- voucherd "

// lastRun is the output of the latest run, from its runMarker on.
func (l *lockedBuffer) lastRun() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.b.String()
	if i := strings.LastIndex(out, runMarker); i >= 0 {
		return out[i:]
	}
	return out
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tail is the last n bytes, from a line start.
func (l *lockedBuffer) tail(n int) string {
	s := l.String()
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "...\n" + s
}

// Lines returns the lines of the output that contain substr (e.g. "level=ERROR").
func (p *Proc) Lines(substr string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(p.Logs()))
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// Freeze stops the process with SIGSTOP, as a long pause would (a stalled VM,
// a stop-the-world): it keeps its connections, leases and consumer-group
// membership and does nothing until Thaw. Kill works on a frozen process.
func (p *Proc) Freeze(t testing.TB) {
	t.Helper()
	if !p.signal(syscall.SIGSTOP) {
		t.Fatalf("testproc: voucherd %s is not running", p.Name)
	}
}

// Thaw resumes a frozen process (SIGCONT).
func (p *Proc) Thaw(t testing.TB) {
	t.Helper()
	if !p.signal(syscall.SIGCONT) {
		t.Fatalf("testproc: voucherd %s is not running", p.Name)
	}
}
