package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"voucherd/internal/testenv"
)

// TestKeyCLI_CreateListRevoke: `voucherd key create` prints a key once,
// which a running server accepts at once; `key list` shows it by prefix,
// never whole; `key revoke` makes the server refuse it within a second
// (told through Redis); both are audited as the CLI's operating-system
// user; bad input is refused with the field and makes no key.
func TestKeyCLI_CreateListRevoke(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"API_KEY_TTL": "1h"})
	code := bigVoucher(t, s)
	name := keyName("cli key")
	out, err := voucherdRun(databaseURL, "key", "create", "-name", name, "-role", "storefront", "-rate", "100", "-expires", "720h")
	if err != nil {
		t.Fatalf("voucherd key create: %v", err)
	}
	m := regexp.MustCompile(`(?m)^API key (\d+) \(.*\) created.*\n(vk_live_[A-Za-z0-9_-]{32,})$`).FindStringSubmatch(strings.TrimSpace(out))
	if m == nil {
		t.Fatalf("voucherd key create printed %q", out)
	}
	id, secret := m[1], m[2]
	if got := reserveWith(t, s, secret, code); got.Status != http.StatusCreated {
		t.Fatalf("a reserve with the CLI's key: %d %s", got.Status, got.Raw)
	}
	list, err := voucherdRun(databaseURL, "key", "list")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(list, secret) || !regexp.MustCompile(`(?m)^`+id+`\s+`+regexp.QuoteMeta(secret[:14])+`\s+`+regexp.QuoteMeta(name)+`\s+storefront\s+\d{4}-`).MatchString(list) {
		t.Errorf("voucherd key list does not show key %s by its prefix alone:\n%s", id, list)
	}
	if out, err := voucherdRun(databaseURL, "key", "revoke", "-id", id); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("voucherd key revoke: %v %q", err, out)
	}
	testenv.EventuallyWithin(t, time.Second, "the key revoked with the CLI refused", func() (bool, string) {
		got := reserveWith(t, s, secret, code)
		return got.Status == http.StatusUnauthorized, got.Raw
	})
	var actors []string
	rows, err := s.db.Query(context.Background(), `SELECT action || ' ' || actor FROM api_key_audit WHERE key_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a string
		_ = rows.Scan(&a)
		actors = append(actors, a)
	}
	rows.Close()
	if len(actors) != 2 || !strings.HasPrefix(actors[0], "created cli:") || !strings.HasPrefix(actors[1], "revoked cli:") {
		t.Errorf("the CLI's changes in the audit log: %q", actors)
	}

	bad := keyName("cli refused")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-name", bad, "-role", "admin", "-expires", "2001-01-01T00:00:00Z"}, "expiresAt"},
		{[]string{"-name", bad, "-role", "admin", "-rate", "-1"}, "ratePerSecond"},
		{[]string{"-name", bad, "-role", "admin", "-burst", "3"}, "burst"},
		{[]string{"-name", bad, "-role", "marketer"}, "role"},
		{[]string{"-name", strings.Repeat("n", 200), "-role", "admin"}, "name"},
		{[]string{"-name", bad, "-role", "admin", "-expires", "soon"}, "expiresAt"},
	} {
		out, err := voucherdRun(databaseURL, append([]string{"key", "create"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(out, "vk_live_") {
			t.Errorf("voucherd key create %q: %v (printed %q), want an error naming %s", tc.args, err, out, tc.want)
		}
	}
	if out, err := voucherdRun(databaseURL, "key", "revoke", "-id", "abc"); err == nil {
		t.Errorf("voucherd key revoke -id abc: printed %q", out)
	}
	var made int
	if err := s.db.QueryRow(context.Background(), `SELECT count(*) FROM api_key WHERE name = $1`, bad).Scan(&made); err != nil || made != 0 {
		t.Errorf("refused command lines made %d keys (%v)", made, err)
	}
}
