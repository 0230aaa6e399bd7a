// Package deploy tests the deployment files as far as this machine can: the
// systemd unit passes systemd-analyze verify, and voucherd serve started
// with the example env file (its placeholders filled) answers /readyz.
// The Dockerfile cannot be built here (no image registry is reachable).
package deploy

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"voucherd/internal/testenv"
	"voucherd/internal/testproc"
)

var (
	testDatabaseURL = testenv.DatabaseURL()
	testRedisURL    = testenv.RedisURL()
)

// envFile reads KEY=value lines as systemd's EnvironmentFile does (comments
// and blank lines skipped), in order.
func envFile(t *testing.T, path string) (keys []string, values map[string]string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	values = map[string]string{}
	lines := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") || strings.HasPrefix(v, `"`) {
			t.Fatalf("%s:%d: not KEY=value: %q", path, n, line)
		}
		if _, dup := values[k]; dup {
			t.Fatalf("%s:%d: %s given twice", path, n, k)
		}
		keys = append(keys, k)
		values[k] = v
	}
	return keys, values
}

// settingsRead are the names internal/app reads from the environment.
func settingsRead(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../internal/app/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no internal/app sources: %v", err)
	}
	re := regexp.MustCompile(`(?:getenv|duration)\("([A-Z][A-Z0-9_]+)"`)
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(data, -1) {
			names = append(names, string(m[1]))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func TestDeploy_TheExampleEnvFileHasEverySetting(t *testing.T) {
	t.Parallel()
	_, values := envFile(t, "voucherd.env.example")
	// Not for a production server: test hooks and the development broker.
	notHere := []string{"TEST_FAULTS", "CLOCK_OFFSET", "BROKER_ADDR", "BROKER_DATA_DIR"}
	for _, name := range append(settingsRead(t), "GOMEMLIMIT") {
		if _, ok := values[name]; !ok && !slices.Contains(notHere, name) {
			t.Errorf("deploy/voucherd.env.example lacks %s", name)
		}
	}
	if values["APP_ENV"] != "production" {
		t.Errorf("APP_ENV=%q, want production", values["APP_ENV"])
	}
	for _, secret := range []string{"STOREFRONT_TOKENS", "ADMIN_TOKENS", "METRICS_TOKENS", "DATABASE_URL", "REDIS_URL"} {
		if !strings.Contains(values[secret], "CHANGE_ME") {
			t.Errorf("%s=%q is not a placeholder: a secret must not ship in the example", secret, values[secret])
		}
	}
}

func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestDeploy_ServeWithTheExampleEnvFileAnswersReadyz(t *testing.T) {
	keys, values := envFile(t, "voucherd.env.example")
	broker := testproc.Broker(t, nil)
	// Each placeholder gets what this machine has.
	fill := map[string]string{
		"DATABASE_URL":      testDatabaseURL,
		"REDIS_URL":         testRedisURL,
		"KAFKA_BROKERS":     broker.Addr,
		"STOREFRONT_TOKENS": randomToken(t),
		"ADMIN_TOKENS":      randomToken(t),
		"METRICS_TOKENS":    randomToken(t),
		"TRUSTED_PROXIES":   "127.0.0.0/8",
	}
	env := map[string]string{}
	for _, k := range keys {
		v := values[k]
		if strings.Contains(v, "CHANGE_ME") {
			filled, ok := fill[k]
			if !ok {
				t.Fatalf("%s=%s: a placeholder this test does not know how to fill", k, v)
			}
			v = filled
		}
		env[k] = v
	}
	// The example listens on every interface at :8080; here a free loopback
	// port of testproc's choosing.
	delete(env, "HTTP_ADDR")
	serve := testproc.Serve(t, env) // waits for /readyz to answer 200

	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, serve.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := get("/readyz", ""); status != http.StatusOK || !strings.Contains(body, `"ready"`) {
		t.Errorf("GET /readyz: %d %s", status, body)
	}
	// It runs as production: no GraphiQL, /metrics only with a token.
	if status, _ := get("/graphql", ""); status == http.StatusOK {
		t.Error("GET /graphql (GraphiQL) answers 200 with the production env file")
	}
	if status, _ := get("/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", status)
	}
	if status, _ := get("/metrics", env["METRICS_TOKENS"]); status != http.StatusOK {
		t.Errorf("GET /metrics with METRICS_TOKENS: %d, want 200", status)
	}
	if strings.Contains(serve.Logs(), "dev-password") || strings.Contains(serve.Logs(), "development tokens") {
		t.Errorf("serve with the production env file used development defaults:\n%s", serve.Logs())
	}
}

func TestDeploy_TheSystemdUnitVerifiesAndIsHardened(t *testing.T) {
	t.Parallel()
	unit, err := os.ReadFile("systemd/voucherd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ExecStart=/usr/local/bin/voucherd serve", "EnvironmentFile=/etc/voucherd/voucherd.env",
		"DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes", "CapabilityBoundingSet=\n", "Restart=on-failure",
	} {
		if !bytes.Contains(unit, []byte(want)) {
			t.Errorf("voucherd.service lacks %q", strings.TrimSpace(want))
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (Debian's systemd package has it): the unit's syntax is not verified")
	}
	// verify wants ExecStart's binary to exist: the one built for the tests.
	dir := t.TempDir()
	path := filepath.Join(dir, "voucherd.service")
	unit = bytes.ReplaceAll(unit, []byte("/usr/local/bin/voucherd"), []byte(testproc.Binary(t)))
	if err := os.WriteFile(path, unit, 0o600); err != nil { //nolint:gosec // G703: a file in the test's temp dir
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput() //nolint:gosec // G204: the unit this test wrote
	// Warnings (an unknown key, a bad value) exit 0 but print: none allowed.
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The Dockerfile cannot be built here; what can be checked is that it
// builds with go.mod's Go and runs as a non-root user.
func TestDeploy_TheDockerfileUsesGoModsGoAndANonRootUser(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9.]+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	docker, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM golang:" + string(m[1]) + "-", " AS build", "COPY --from=build", "USER nonroot"} {
		if !bytes.Contains(docker, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
