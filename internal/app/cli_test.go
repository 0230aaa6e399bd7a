package app

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"voucherd/internal/testproc"
)

// cliCase is one command line and the settings it names in its usage.
type cliCase struct {
	args     []string
	usage    string   // the usage's first line starts so
	settings []string // some of the settings its usage must name
}

var cliCases = []cliCase{
	{[]string{"serve"}, "usage: voucherd serve", []string{"HTTP_ADDR", "DATABASE_URL", "REDIS_URL", "TRUSTED_PROXIES", "APP_ENV", "STOREFRONT_TOKENS"}},
	{[]string{"migrate"}, "usage: voucherd migrate", []string{"DATABASE_URL", "APP_ENV"}},
	{[]string{"broker"}, "usage: voucherd broker", []string{"BROKER_ADDR", "BROKER_DATA_DIR"}},
	{[]string{"help"}, "usage: voucherd help", nil},
	{[]string{"user"}, "usage: voucherd user add", []string{"DATABASE_URL"}},
	{[]string{"user", "add"}, "usage: voucherd user add", []string{"DATABASE_URL", "APP_ENV"}},
	{[]string{"user", "list"}, "usage: voucherd user list", []string{"DATABASE_URL"}},
	{[]string{"user", "role"}, "usage: voucherd user role", []string{"DATABASE_URL"}},
	{[]string{"user", "disable"}, "usage: voucherd user disable", []string{"DATABASE_URL"}},
	{[]string{"user", "enable"}, "usage: voucherd user enable", []string{"DATABASE_URL"}},
	{[]string{"user", "reset"}, "usage: voucherd user reset", []string{"DATABASE_URL", "HTTP_ADDR"}},
	{[]string{"user", "unlock"}, "usage: voucherd user unlock", []string{"DATABASE_URL"}},
	{[]string{"key"}, "usage: voucherd key create", []string{"DATABASE_URL", "REDIS_URL"}},
	{[]string{"key", "create"}, "usage: voucherd key create", []string{"DATABASE_URL", "REDIS_URL", "APP_ENV"}},
	{[]string{"key", "list"}, "usage: voucherd key list", []string{"DATABASE_URL"}},
	{[]string{"key", "revoke"}, "usage: voucherd key revoke", []string{"DATABASE_URL", "REDIS_URL"}},
}

// cliEnv are settings under which any command that did start would fail
// and say so: a database nobody answers on, server and broker ports the
// test holds, and an APP_ENV that stops any start that reads the settings.
func cliEnv(t *testing.T) map[string]string {
	return map[string]string{
		"DATABASE_URL": "postgres://voucher@127.0.0.1:1/none?connect_timeout=1",
		"HTTP_ADDR":    testproc.HeldAddr(t), "BROKER_ADDR": testproc.HeldAddr(t),
	}
}

// TestRun_EveryCommandAnswersHelpWithItsUsageAndDoesNothingElse: -h and
// --help print the command's usage, naming the settings it reads, on
// stdout, and Run returns nil at once: no settings read (a bad one does not
// matter), no database, no listener (serve's and the broker's ports are
// the test's: a listen there would fail).
func TestRun_EveryCommandAnswersHelpWithItsUsageAndDoesNothingElse(t *testing.T) {
	t.Parallel()
	for _, tc := range cliCases {
		for _, help := range []string{"-h", "--help", "-help"} {
			settings := cliEnv(t)
			settings["APP_ENV"] = "bogus" // read, it would stop the command
			args := append(slices.Clone(tc.args), help)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var out, errOut strings.Builder
			err := Run(ctx, args, env(settings), &out, &errOut)
			cancel()
			desc := strings.Join(args, " ")
			if err != nil || ExitCode(err) != 0 {
				t.Errorf("voucherd %s: %v, want nil (exit 0)", desc, err)
			}
			if !strings.HasPrefix(out.String(), tc.usage) {
				t.Errorf("voucherd %s printed %q, want its usage (%q...)", desc, out.String(), tc.usage)
			}
			for _, s := range tc.settings {
				if !strings.Contains(out.String(), s) {
					t.Errorf("voucherd %s: the usage does not name %s", desc, s)
				}
			}
			if errOut.Len() != 0 {
				t.Errorf("voucherd %s wrote to stderr: %q", desc, errOut.String())
			}
		}
	}
	// voucherd -h, voucherd help: every command, user list too.
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var out strings.Builder
		if err := Run(context.Background(), args, env(nil), &out, &strings.Builder{}); err != nil {
			t.Errorf("voucherd %s: %v", strings.Join(args, " "), err)
		}
		for _, cmd := range []string{"serve", "migrate", "user add", "user list", "user role", "user disable", "user enable", "user reset", "user unlock", "key create", "key list", "key revoke", "broker", "help"} {
			if !strings.Contains(out.String(), "\n  "+cmd+" ") {
				t.Errorf("voucherd %s does not list %q:\n%s", strings.Join(args, " "), cmd, out.String())
			}
		}
	}
	// voucherd help COMMAND is COMMAND -h.
	var out strings.Builder
	if err := Run(context.Background(), []string{"help", "user", "unlock"}, env(nil), &out, &strings.Builder{}); err != nil || !strings.HasPrefix(out.String(), "usage: voucherd user unlock") {
		t.Errorf("voucherd help user unlock: %v, %q", err, out.String())
	}
}

// TestRun_AnUnknownFlagOrArgumentIsAUsageError: an unknown flag, an extra
// argument, an unknown command or a missing flag is a UsageError (exit 2)
// carrying the command's usage, returned before anything is started.
func TestRun_AnUnknownFlagOrArgumentIsAUsageError(t *testing.T) {
	t.Parallel()
	var lines [][]string
	for _, tc := range cliCases {
		lines = append(lines, append(slices.Clone(tc.args), "-no-such-flag"), append(slices.Clone(tc.args), "extra"), append(slices.Clone(tc.args), "--no-such-flag=1"))
	}
	lines = append(lines,
		[]string{"-no-such-flag"}, []string{"servee"}, []string{"user", "promote"}, []string{"help", "nothing"},
		[]string{"user", "add", "-email", "a@example.com"}, []string{"user", "role", "-role", "admin"}, []string{"user", "disable"},
		[]string{"user", "enable"}, []string{"user", "reset"}, []string{"user", "unlock"},
		[]string{"user", "list", "-email", "x@example.com"}, []string{"broker", "-addr", ":9092"}, []string{"help", "serve", "extra"},
		[]string{"key", "rotate"}, []string{"key", "create", "-name", "ci"}, []string{"key", "create", "-role", "admin"}, []string{"key", "revoke"},
		[]string{"key", "list", "-id", "1"}, []string{"key", "create", "-name", "ci", "-role", "admin", "-rate", "many"})
	for _, args := range lines {
		settings := cliEnv(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out strings.Builder
		err := Run(ctx, args, env(settings), &out, &strings.Builder{})
		cancel()
		desc := strings.Join(args, " ")
		var u *UsageError
		if !errors.As(err, &u) || ExitCode(err) != 2 {
			t.Errorf("voucherd %s: %v (exit %d), want a usage error (exit 2)", desc, err, ExitCode(err))
			continue
		}
		if !strings.Contains(err.Error(), "usage: voucherd") {
			t.Errorf("voucherd %s: %q, want the usage with the reason", desc, err)
		}
		if out.Len() != 0 {
			t.Errorf("voucherd %s printed %q on stdout", desc, out.String())
		}
	}
	if ExitCode(nil) != 0 || ExitCode(errors.New("postgres does not answer")) != 1 {
		t.Error("ExitCode: want 0 for nil, 1 for a failure")
	}
}

// TestRun_TheUsageNamesEverySettingItReads: serve's usage names every
// setting loadConfig and the collector read (tests' hooks aside), the
// broker's every setting of its own, and each named setting has a line.
func TestRun_TheUsageNamesEverySettingItReads(t *testing.T) {
	t.Parallel()
	read := map[string]bool{}
	record := func(name string) string { read[name] = true; return "" }
	_, _ = loadConfig(record)
	tuneGC(func(name string) string { read[name] = true; return strconv.Itoa(100) })
	read["GOMEMLIMIT"] = true // read by the Go runtime itself
	delete(read, "TEST_FAULTS")
	for name := range read {
		if !slices.Contains(serveCommand.settings, name) {
			t.Errorf("serve reads %s; its usage does not name it", name)
		}
	}
	brokerRead := map[string]bool{}
	_, _ = loadBrokerSettings(func(name string) string { brokerRead[name] = true; return "" })
	for name := range brokerRead {
		if !slices.Contains(brokerCommand.settings, name) {
			t.Errorf("broker reads %s; its usage does not name it", name)
		}
	}
	all := [][]string{serveCommand.settings, migrateCommand.settings, brokerCommand.settings}
	for _, sub := range userSubs {
		all = append(all, sub.settings)
	}
	for _, names := range all {
		for _, name := range names {
			if settingHelp[name] == "" {
				t.Errorf("%s has no line in settingHelp", name)
			}
		}
	}
}
