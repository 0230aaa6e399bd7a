package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The orchestrator's processes: voucherd and the ceiling as servers, the
// load generator as a child per load phase. Each is an OS process of its
// own, so the server's tail is not shortened or stretched by a load
// generator sharing its Go scheduler and collector.

// Banners the servers print on stdout once they listen.
const (
	voucherdBanner = "voucherd listening on "
	ceilingBanner  = "flashbench ceiling listening on "
	brokerBanner   = "flashbench broker listening on "
)

// binaries are voucherd and flashbench built once for the run.
type binaries struct {
	dir, voucherd, flashbench string
}

// buildBinaries runs `go build` of cmd/voucherd and cmd/flashbench into a
// temporary directory, from the module that holds this package.
func buildBinaries(ctx context.Context, stderr io.Writer) (*binaries, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMOD: %w (flashbench builds voucherd with the go command)", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if strings.TrimSpace(string(gomod)) == "" || strings.TrimSpace(string(gomod)) == os.DevNull {
		return nil, errors.New("run flashbench inside the voucherd module (go env GOMOD is empty)")
	}
	dir, err := os.MkdirTemp("", "flashbench-")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "flashbench: go build -o %s/ ./cmd/voucherd ./cmd/flashbench\n", dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/voucherd", "./cmd/flashbench")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, stderr, stderr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("go build: %w", err)
	}
	return &binaries{dir: dir, voucherd: filepath.Join(dir, "voucherd"), flashbench: filepath.Join(dir, "flashbench")}, nil
}

func (b *binaries) remove() { _ = os.RemoveAll(b.dir) }

// server is a child process that serves HTTP on loopback.
type server struct {
	name string
	URL  string
	cmd  *exec.Cmd
	done chan error
}

// withEnv is the environment plus overrides (an override wins).
func withEnv(environ []string, overrides map[string]string) []string {
	out := make([]string, 0, len(environ)+len(overrides))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := overrides[k]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range overrides {
		out = append(out, k+"="+v)
	}
	return out
}

// startServer starts path with args and env, waits for its banner on stdout
// (the URL follows it), then for ready (a path answering 200, "" for none).
// Its stderr goes to logw. It gets SIGTERM if flashbench dies.
func startServer(ctx context.Context, name, path string, args, env []string, banner, ready string, logw io.Writer) (*server, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = env
	cmd.Stderr = logw
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, done: make(chan error, 1)}
	urls := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		found := false
		for lines.Scan() {
			if u, ok := strings.CutPrefix(lines.Text(), banner); ok && !found {
				found = true
				urls <- strings.TrimSpace(u)
			}
		}
		close(urls)
		_, _ = io.Copy(io.Discard, stdout)
		s.done <- cmd.Wait()
	}()
	select {
	case u, ok := <-urls:
		if !ok {
			err := <-s.done
			s.done <- err
			return nil, fmt.Errorf("%s exited before it listened: %v (its log: %s)", name, err, logName(logw))
		}
		s.URL = u
	case <-time.After(2 * time.Minute):
		s.stop()
		return nil, fmt.Errorf("%s did not listen within 2 minutes", name)
	case <-ctx.Done():
		s.stop()
		return nil, ctx.Err()
	}
	for _, u := range strings.Split(s.URL, ",") {
		if !strings.Contains(u, "://") {
			u = "kafka://" + u
		}
		if err := requireLoopbackURL(u); err != nil {
			s.stop()
			return nil, err
		}
	}
	if ready != "" {
		if err := waitReady(ctx, s.URL+ready); err != nil {
			s.stop()
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return s, nil
}

func logName(w io.Writer) string {
	if f, ok := w.(*os.File); ok {
		return f.Name()
	}
	return "stderr"
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM and waits for the graceful shutdown; a server still
// running after 30 s is killed.
func (s *server) stop() error {
	if s == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		err := <-s.done
		s.done <- err
		return fmt.Errorf("%s did not stop within 30s of SIGTERM: killed", s.name)
	}
}

// waitReady polls url until it answers 200 (voucherd's /readyz: PostgreSQL
// and Redis answer).
func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s never answered 200", url)
}

// runLoad runs `flashbench load` with spec and reads its result. The load
// stops itself after spec.MaxTime; a load process that does not is stopped a
// minute later.
func runLoad(ctx context.Context, bin string, spec loadSpec, stderr io.Writer) (*loadResult, error) {
	out, err := runLoadProcess(ctx, bin, spec, stderr)
	if err != nil {
		return nil, err
	}
	var lr loadResult
	if err := json.Unmarshal(out, &lr); err != nil {
		return nil, fmt.Errorf("load process: its answer: %w", err)
	}
	if lr.Requests != int64(len(lr.Latencies)) || lr.Requests > spec.Requests {
		return nil, fmt.Errorf("load process: %d requests with %d latencies (asked for %d)", lr.Requests, len(lr.Latencies), spec.Requests)
	}
	lr.SuccessOrders = make([]bool, spec.Requests)
	for _, j := range lr.Won {
		if j < 0 || j >= spec.Requests {
			return nil, fmt.Errorf("load process: order %d out of range", j)
		}
		lr.SuccessOrders[j] = true
	}
	return &lr, nil
}

// runLoadProcess runs `flashbench load` with spec and returns its stdout.
func runLoadProcess(ctx context.Context, bin string, spec loadSpec, stderr io.Writer) ([]byte, error) {
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, spec.MaxTime+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "load")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &out, stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("load process: %w", err)
	}
	return out.Bytes(), nil
}
