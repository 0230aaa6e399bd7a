package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestUsersCLI_EnableLetsADisabledUserSignInAgain: `voucherd user enable`
// undoes a disable: the user signs in again with their password, the list
// shows them active, the change is audited with the CLI's user, and
// enabling an active user (or nobody) changes and records nothing.
func TestUsersCLI_EnableLetsADisabledUserSignInAgain(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	addUser(t, map[string]string{"DATABASE_URL": dbURL}, "ola@example.com", "Ola", "operator", "ola's long password")
	run := func(args ...string) (string, error) { return voucherdRun(dbURL, args...) }

	if _, err := run("user", "disable", "-email", "ola@example.com"); err != nil {
		t.Fatal(err)
	}
	if st := newDashboardClient(s).signIn(t, "ola@example.com", "ola's long password"); st != http.StatusForbidden {
		t.Fatalf("a disabled user signed in: %d", st)
	}
	out, err := run("user", "enable", "-email", "OLA@example.com")
	if err != nil || !strings.Contains(out, "ola@example.com enabled") {
		t.Fatalf("user enable: %q, %v", out, err)
	}
	if st := newDashboardClient(s).signIn(t, "ola@example.com", "ola's long password"); st != http.StatusSeeOther {
		t.Errorf("an enabled user signing in: %d, want 303", st)
	}
	list, _ := run("user", "list")
	if !regexp.MustCompile(`(?m)^ola@example\.com\s+Ola\s+operator\s+active\s`).MatchString(list) {
		t.Errorf("user list after enable:\n%s", list)
	}
	if out, err := run("user", "enable", "-email", "ola@example.com"); err != nil || !strings.Contains(out, "enabled") {
		t.Errorf("enabling an active user: %q, %v", out, err)
	}
	if _, err := run("user", "enable", "-email", "nobody@example.com"); err == nil || !strings.Contains(err.Error(), "no user") {
		t.Errorf("enabling nobody: %v, want an error saying no user", err)
	}
	if _, err := run("user", "enable"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("enable without an email: %v, want the usage", err)
	}
	var actions []string
	rows, err := db.Query(context.Background(), `SELECT action || ' by ' || actor FROM dashboard_user_audit WHERE user_email = 'ola@example.com' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		actions = append(actions, a)
	}
	if len(actions) != 3 || !strings.HasPrefix(actions[1], "disabled by cli:") || !strings.HasPrefix(actions[2], "enabled by cli:") {
		t.Errorf("ola's audit: %q, want added, disabled and one enabled, by the CLI's user", actions)
	}
}
