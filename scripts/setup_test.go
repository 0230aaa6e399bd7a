// Package scripts tests scripts/setup.sh as a newcomer meets it: an old Go,
// URLs of services elsewhere, a password-protected PostgreSQL, no root.
// Every run points the script's local place (SETUP_PG_PORT,
// SETUP_REDIS_PORT) at free ports and puts a fake apt-get first on PATH, so
// it never touches the machine's shared services or packages.
package scripts

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"voucherd/internal/testenv"
	"voucherd/internal/testpg"
)

var (
	testDatabaseURL = testenv.DatabaseURL()
	testRedisURL    = testenv.RedisURL()
)

// goModVersion is the go line of go.mod, which the script must demand.
func goModVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	return string(m[1])
}

type run struct {
	out     string // stdout and stderr
	exit    int
	aptUsed bool // the fake apt-get was called
}

// setup runs a copy of setup.sh (next to a copy of go.mod) with only the
// given environment besides PATH and HOME; as the OS user nobody when
// asUser is set. bins are extra programs put first on PATH (name -> script).
func setup(t *testing.T, env map[string]string, bins map[string]string, asUser string, args ...string) run {
	t.Helper()
	testenv.SkipShort(t)
	// Not t.TempDir(): its parent is private to root, and nobody must reach it.
	dir, err := os.MkdirTemp("", "setup-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { //nolint:gosec // G302: nobody runs the copy in it
		t.Fatal(err)
	}
	for _, f := range []string{"setup.sh", "../go.mod"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.Base(f))
		if f == "setup.sh" {
			if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
				t.Fatal(err)
			}
			dst = filepath.Join(dir, "scripts", "setup.sh")
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil { //nolint:gosec // G703, G306: the test's own copy, run by nobody
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o777); err != nil { //nolint:gosec // G302: the fake apt-get run as nobody logs here
		t.Fatal(err)
	}
	aptLog := filepath.Join(bin, "apt-get.log")
	all := map[string]string{"apt-get": "#!/bin/sh\necho \"$@\" >>" + aptLog + "\nexit 1\n"}
	for name, script := range bins {
		all[name] = script
	}
	for name, script := range all {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	goDir := filepath.Dir(goBinary(t))
	vars := []string{
		"PATH=" + bin + ":" + goDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + dir,
		"GOTOOLCHAIN=local",
		// Never the machine's own services: the local place is free ports.
		"SETUP_PG_PORT=" + strconv.Itoa(freePort(t)),
		"SETUP_REDIS_PORT=" + strconv.Itoa(freePort(t)),
	}
	// Later entries win (os/exec keeps the last of equal names).
	for k, v := range env {
		vars = append(vars, k+"="+v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	//nolint:gosec // G204: the script under test, with the test's arguments
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(dir, "scripts", "setup.sh")}, args...)...)
	cmd.Dir = dir
	cmd.Env = vars
	if asUser != "" {
		u, err := user.Lookup(asUser)
		if err != nil {
			t.Fatalf("no OS user %s: %v", asUser, err)
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			t.Fatalf("OS user %s: uid %q gid %q", asUser, u.Uid, u.Gid)
		}
		if os.Geteuid() != 0 && strconv.Itoa(os.Geteuid()) != u.Uid {
			t.Fatalf("running setup.sh as %s needs root", asUser)
		}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		}
	}
	out, err := cmd.CombinedOutput()
	r := run{out: string(out)}
	if exit, ok := err.(*exec.ExitError); ok {
		r.exit = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("setup.sh: %v", err)
	}
	_, statErr := os.Stat(aptLog)
	r.aptUsed = statErr == nil
	return r
}

func goBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/local/go/bin/go"); err == nil {
		return "/usr/local/go/bin/go"
	}
	t.Fatal("no go binary on PATH or in /usr/local/go/bin")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (r run) must(t *testing.T, exit int, says ...string) {
	t.Helper()
	if r.exit != exit {
		t.Errorf("setup.sh exited %d, want %d:\n%s", r.exit, exit, r.out)
	}
	for _, s := range says {
		if !strings.Contains(r.out, s) {
			t.Errorf("setup.sh does not say %q:\n%s", s, r.out)
		}
	}
}

func TestSetup_AnOldGoIsRefusedFirstSayingWhichAndHowToGetIt(t *testing.T) {
	t.Parallel()
	want := goModVersion(t)
	// Debian's golang-go: go env GOVERSION says go1.19.8.
	oldGo := "#!/bin/sh\nif [ \"$1 $2\" = 'env GOVERSION' ]; then echo go1.19.8; exit 0; fi\necho 'go version go1.19.8 linux/amd64'\n"
	r := setup(t, map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/x"}, map[string]string{"go": oldGo}, "")
	r.must(t, 1, "Go 1.19.8", "go.mod needs Go "+want+" or newer", "https://go.dev/dl/", "golang-go")
	if strings.Contains(r.out, "DATABASE_URL") || r.aptUsed {
		t.Errorf("setup.sh went on after refusing the Go:\n%s", r.out)
	}
}

func TestSetup_TheRightGoIsReported(t *testing.T) {
	t.Parallel()
	r := setup(t, map[string]string{"SETUP": "skip"}, nil, "")
	r.must(t, 0, "go.mod needs "+goModVersion(t)+")", "SETUP=skip")
}

func TestSetup_SETUPskipChecksNoService(t *testing.T) {
	t.Parallel()
	dead := fmt.Sprintf("postgres://voucher@127.0.0.1:%d/voucher?sslmode=disable", freePort(t))
	r := setup(t, map[string]string{"SETUP": "skip", "DATABASE_URL": dead, "TEST_DATABASE_URL": dead}, nil, "", "--with-chromium")
	r.must(t, 0, "SETUP=skip")
	if strings.Contains(r.out, "postgresql") || r.aptUsed {
		t.Errorf("SETUP=skip checked or installed something:\n%s", r.out)
	}
}

// URLs that answer are used as they are: nothing installed, nothing started
// (the local place is a free port, so a start would be seen).
func TestSetup_URLsThatAnswerAreUsedAndNothingIsInstalled(t *testing.T) {
	t.Parallel()
	r := setup(t, map[string]string{
		"DATABASE_URL":      testDatabaseURL + "&pool_max_conns=2",
		"TEST_DATABASE_URL": testDatabaseURL,
		"REDIS_URL":         testRedisURL,
		"TEST_REDIS_URL":    testRedisURL,
	}, nil, "nobody")
	r.must(t, 0, "DATABASE_URL answers", "TEST_DATABASE_URL answers", "REDIS_URL answers", "TEST_REDIS_URL answers", "setup: done")
	if r.aptUsed || strings.Contains(r.out, "starting") {
		t.Errorf("setup.sh installed or started something although every URL answers:\n%s", r.out)
	}
}

func TestSetup_AURLElsewhereThatDoesNotAnswerIsNamedWithoutItsPassword(t *testing.T) {
	t.Parallel()
	r := setup(t, map[string]string{
		"DATABASE_URL": "postgres://shop:s3cret-pw@127.0.0.2:" + strconv.Itoa(freePort(t)) + "/shop?sslmode=disable",
		"REDIS_URL":    testRedisURL,
	}, nil, "", "--run")
	r.must(t, 1, "DATABASE_URL=postgres://shop:***@127.0.0.2:", "does not answer", "Point DATABASE_URL at a PostgreSQL that answers")
	if strings.Contains(r.out, "s3cret-pw") || r.aptUsed {
		t.Errorf("setup.sh showed the password or installed something:\n%s", r.out)
	}
}

// A PostgreSQL on the local port that asks for a password, and that the
// script cannot administer (no root): the way out is DATABASE_URL.
func TestSetup_APasswordProtectedPostgresSaysToSetDATABASE_URL(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: it runs setup.sh as nobody and rewrites its own cluster's pg_hba.conf")
	}
	c := testpg.Start(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var hba string
	if err := conn.QueryRow(ctx, "show hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	// Every host connection asks for a password, as on a managed server.
	if err := os.WriteFile(hba, []byte("local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"alter role voucher password 'shop-pw'", "alter role postgres password 'admin-pw'", "select pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	port := strconv.Itoa(c.Port)
	local := map[string]string{"SETUP_PG_PORT": port, "REDIS_URL": testRedisURL}
	r := setup(t, local, nil, "nobody", "--run")
	r.must(t, 1, "asks for a password", "Set DATABASE_URL", "postgres://USER:PASSWORD@127.0.0.1:"+port+"/")
	if r.aptUsed {
		t.Errorf("setup.sh tried to install:\n%s", r.out)
	}

	local["DATABASE_URL"] = "postgres://voucher:shop-pw@127.0.0.1:" + port + "/voucher?sslmode=disable"
	r = setup(t, local, nil, "nobody", "--run")
	r.must(t, 0, "DATABASE_URL answers (postgres://voucher:***@127.0.0.1:"+port+"/voucher")
}

// Without root, each step that needs it says so and says what to do
// instead.
func TestSetup_WithoutRootSaysWhatNeedsRootAndWhatToDoInstead(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root: it runs setup.sh as nobody")
	}
	// Nothing answers on the local Redis port (a free one).
	r := setup(t, map[string]string{"DATABASE_URL": testDatabaseURL}, nil, "nobody", "--run")
	r.must(t, 1, "starting Redis needs root", "sudo bash scripts/setup.sh", "or instead: start a Redis on 127.0.0.1:", "set REDIS_URL")
}
