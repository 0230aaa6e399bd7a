package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"voucherd/internal/testproc"
)

// voucherd runs the built binary with settings only (no inherited
// environment) and returns its exit status and output; a run that is not
// over within 30 s is killed and fails the test (a server that started
// would run until killed; a busy machine is slow, not endless).
func voucherd(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// Built (the first time) before the clock starts: a build on a busy
	// machine took longer than the run's bound.
	bin := testproc.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...) //nolint:gosec // G204: the binary under test, with the test's arguments
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("voucherd %s was still running after 30 s: it started something", strings.Join(args, " "))
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), errOut.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errOut.String()
}

// TestVoucherd_HelpExits0AndAUsageErrorExits2: the binary's exit status
// for every command: -h and --help print the usage on stdout and exit 0
// having started nothing (serve with a database nobody answers on, the
// broker on a port the test holds: a run that started either would fail to
// bind, or run into the 30 s bound); an unknown flag or an extra argument
// prints the usage on stderr and exits 2; a failure exits 1.
func TestVoucherd_HelpExits0AndAUsageErrorExits2(t *testing.T) {
	t.Parallel()
	httpAddr, brokerAddr := testproc.HeldAddr(t), testproc.HeldAddr(t)
	env := map[string]string{
		"DATABASE_URL": "postgres://voucher@127.0.0.1:1/none?connect_timeout=1",
		"HTTP_ADDR":    httpAddr, "BROKER_ADDR": brokerAddr,
	}
	commands := [][]string{{"serve"}, {"migrate"}, {"broker"}, {"help"}, {"user"}, {"user", "add"}, {"user", "list"},
		{"user", "role"}, {"user", "disable"}, {"user", "enable"}, {"user", "reset"}, {"user", "unlock"}}
	for _, c := range commands {
		name := strings.Join(c, " ")
		for _, help := range []string{"-h", "--help"} {
			code, out, errOut := voucherd(t, env, append(append([]string{}, c...), help)...)
			if code != 0 || !strings.HasPrefix(out, "usage: voucherd "+c[0]) || errOut != "" {
				t.Errorf("voucherd %s %s: exit %d, stdout %q, stderr %q; want 0 and the usage on stdout", name, help, code, out, errOut)
			}
			if !strings.Contains(out, "DATABASE_URL") && !strings.Contains(out, "BROKER_ADDR") && c[0] != "help" {
				t.Errorf("voucherd %s %s: the usage names no setting:\n%s", name, help, out)
			}
		}
		for _, bad := range []string{"-no-such-flag", "extra"} {
			code, out, errOut := voucherd(t, env, append(append([]string{}, c...), bad)...)
			if code != 2 || out != "" || !strings.Contains(errOut, "usage: voucherd") || !strings.Contains(errOut, bad) {
				t.Errorf("voucherd %s %s: exit %d, stdout %q, stderr %q; want 2, why and the usage on stderr", name, bad, code, out, errOut)
			}
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		code, out, _ := voucherd(t, env, args...)
		if code != 0 || !strings.Contains(out, "user list") {
			t.Errorf("voucherd %s: exit %d, %q; want 0 and every command, user list too", args[0], code, out)
		}
	}
	if code, _, errOut := voucherd(t, env, "nonsense"); code != 2 || !strings.Contains(errOut, `unknown command "nonsense"`) {
		t.Errorf("voucherd nonsense: exit %d, %q; want 2", code, errOut)
	}
	// A command line that is fine but whose settings are not: exit 1.
	if code, _, errOut := voucherd(t, map[string]string{"APP_ENV": "Production"}, "migrate"); code != 1 || !strings.Contains(errOut, "APP_ENV") {
		t.Errorf("voucherd migrate with APP_ENV=Production: exit %d, %q; want 1 naming APP_ENV", code, errOut)
	}
}
