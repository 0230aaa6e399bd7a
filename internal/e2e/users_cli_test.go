package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"voucherd/internal/accounts"
	"voucherd/internal/app"
)

// voucherdRun runs a voucherd subcommand against the database and returns
// what it printed and its error.
func voucherdRun(dbURL string, args ...string) (string, error) {
	settings := map[string]string{"DATABASE_URL": dbURL, "REDIS_URL": redisURL, "STOREFRONT_TOKENS": storefrontToken, "ADMIN_TOKENS": adminToken, "LOG_LEVEL": "error"}
	var out bytes.Buffer
	err := app.Run(context.Background(), args, func(k string) string { return settings[k] }, &out, io.Discard)
	return out.String(), err
}

// TestUsersCLI_ListRoleDisableReset: `voucherd user list`, `user role`,
// `user disable` and `user reset` do what the users page does, each change
// audited as the CLI's operating-system user; the reset link works once;
// the last admin can be neither demoted nor disabled; bad flags are refused
// before the database is touched.
func TestUsersCLI_ListRoleDisableReset(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL}) // makes dev@localhost, an admin
	env := map[string]string{"DATABASE_URL": dbURL}
	addUser(t, env, "root-admin@example.com", "Root", "admin", "root's long password")
	addUser(t, env, "mia@example.com", "Mia\tMarketer", "marketer", "mia's long password")
	run := func(args ...string) string {
		t.Helper()
		out, err := voucherdRun(dbURL, args...)
		if err != nil {
			t.Fatalf("voucherd %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	refused := func(want string, args ...string) {
		t.Helper()
		out, err := voucherdRun(dbURL, args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("voucherd %s: %v (printed %q), want an error saying %q", strings.Join(args, " "), err, out, want)
		}
	}

	list := run("user", "list")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^EMAIL\s+NAME\s+ROLE\s+STATUS\s+ADDED$`),
		regexp.MustCompile(`(?m)^mia@example\.com\s+Mia Marketer\s+marketer\s+active\s+\d{4}-`),
		regexp.MustCompile(`(?m)^root-admin@example\.com\s+Root\s+admin\s+active\s`),
	} {
		if !want.MatchString(list) {
			t.Errorf("user list printed\n%s\nwant a line matching %s", list, want)
		}
	}
	// More users than the dashboard's page: the CLI lists every one.
	if _, err := db.Exec(context.Background(), `INSERT INTO dashboard_user (email, role, password_hash)
		SELECT 'bulk' || i || '@example.com', 'operator', 'x' FROM generate_series(1, $1) i`, accounts.UserPageSize+20); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM dashboard_user`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(run("user", "list"), "\n") - 1; lines != total {
		t.Errorf("user list printed %d users of %d", lines, total)
	}

	if out := run("user", "role", "-email", "MIA@example.com", "-role", "operator"); out != "user mia@example.com: role marketer -> operator\n" {
		t.Errorf("user role printed %q", out)
	}
	if out := run("user", "role", "-email", "mia@example.com", "-role", "operator"); !strings.Contains(out, "nothing changed") {
		t.Errorf("user role to the same role printed %q", out)
	}
	refused("role must be", "user", "role", "-email", "mia@example.com", "-role", "boss")
	refused("no user", "user", "role", "-email", "nobody@example.com", "-role", "admin")
	refused("usage", "user", "role", "-email", "mia@example.com")
	refused("usage", "user", "promote")
	refused("unexpected", "user", "list", "extra")

	// The reset link works once, on the dashboard.
	out := run("user", "reset", "-email", "mia@example.com", "-base-url", s.URL+"/")
	link := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(s.URL) + `(/admin/password/[A-Za-z0-9_-]{43})$`).FindStringSubmatch(out)
	if link == nil {
		t.Fatalf("user reset printed %q, want a link on %s", out, s.URL)
	}
	mia := newDashboardClient(s)
	if st, _ := mia.postForm(t, link[1], link[1], url.Values{"password": {"mia's new password"}}); st != http.StatusOK {
		t.Fatalf("the reset link answered %d", st)
	}
	if st, _ := mia.postForm(t, "/admin/sign-in", link[1], url.Values{"password": {"yet another password"}}); st != http.StatusGone {
		t.Errorf("the reset link used a second time answered %d, want 410", st)
	}
	if st := mia.signIn(t, "mia@example.com", "mia's new password"); st != http.StatusSeeOther {
		t.Fatalf("signing in with the password from the link: %d", st)
	}

	if out := run("user", "disable", "-email", "mia@example.com"); !strings.Contains(out, "mia@example.com disabled") {
		t.Errorf("user disable printed %q", out)
	}
	if st := mia.status(t, "/admin/vouchers"); st != http.StatusSeeOther {
		t.Errorf("the session of a user disabled from the CLI still works: %d", st)
	}
	if st := newDashboardClient(s).signIn(t, "mia@example.com", "mia's new password"); st != http.StatusForbidden {
		t.Errorf("a disabled user signed in: %d", st)
	}
	if !regexp.MustCompile(`(?m)^mia@example\.com\s.*\sdisabled \d{4}-`).MatchString(run("user", "list")) {
		t.Error("user list does not show mia as disabled")
	}
	refused("disabled", "user", "reset", "-email", "mia@example.com")

	// The last admin.
	run("user", "disable", "-email", "dev@localhost")
	refused("no admin", "user", "disable", "-email", "root-admin@example.com")
	refused("no admin", "user", "role", "-email", "root-admin@example.com", "-role", "operator")
	if !regexp.MustCompile(`(?m)^root-admin@example\.com\s+Root\s+admin\s+active\s`).MatchString(run("user", "list")) {
		t.Error("the last admin was changed")
	}

	// Every change names the CLI's user.
	rows, err := db.Query(context.Background(), `SELECT action, actor, actor_role FROM dashboard_user_audit WHERE user_email = 'mia@example.com' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var action, actor, role string
		if err := rows.Scan(&action, &actor, &role); err != nil {
			t.Fatal(err)
		}
		got = append(got, action+" by "+actor+" ("+role+")")
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	want := []string{"added", "role-changed", "password-link", "password-set", "disabled"}
	if len(got) != len(want) {
		t.Fatalf("mia's audit: %q, want %d lines", got, len(want))
	}
	for i, w := range want {
		who := "by cli:"
		if w == "password-set" {
			who = "by mia@example.com (operator)"
		}
		if !strings.HasPrefix(got[i], w+" ") || !strings.Contains(got[i], who) {
			t.Errorf("mia's audit line %d = %q, want %s %s", i, got[i], w, who)
		}
	}
}

// TestUsers_TwoAdminsDemotingEachOtherAtOnceLeaveOneAdmin: the last two
// admins each make the other a marketer at the same moment, over HTTP, in
// rounds: every time exactly one change goes through and the other is
// refused (409 LAST_ADMIN, or 403 when the first change already made its
// sender a marketer), and one admin is left.
func TestUsers_TwoAdminsDemotingEachOtherAtOnceLeaveOneAdmin(t *testing.T) {
	t.Parallel()
	dbURL, db := ownDatabase(t)
	s := startServer(t, map[string]string{"DATABASE_URL": dbURL})
	env := map[string]string{"DATABASE_URL": dbURL}
	const password = "an admin's password"
	admins := []string{"ann@example.com", "bob@example.com"}
	for _, a := range admins {
		addUser(t, env, a, "", "admin", password)
	}
	if _, err := voucherdRun(dbURL, "user", "disable", "-email", "dev@localhost"); err != nil {
		t.Fatal(err)
	}
	clients := make([]*dashboardClient, 2)
	for i, a := range admins {
		clients[i] = newDashboardClient(s)
		if st := clients[i].signIn(t, a, password); st != http.StatusSeeOther {
			t.Fatalf("signing in %s: %d", a, st)
		}
	}
	for round := range 8 {
		// Each takes its form's CSRF token first, then both post at once.
		tokens := make([]string, 2)
		for i, c := range clients {
			_, body := c.get(t, "/admin/users")
			m := csrfInput.FindStringSubmatch(body)
			if m == nil {
				t.Fatalf("round %d: no CSRF token on the users page of %s", round, admins[i])
			}
			tokens[i] = m[1]
		}
		statuses := make([]int, 2)
		start := make(chan struct{})
		done := make(chan struct{}, 2)
		for i, c := range clients {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				resp, err := c.http.PostForm(s.URL+"/admin/users/role", url.Values{
					"csrf": {tokens[i]}, "email": {admins[1-i]}, "role": {"marketer"},
				})
				if err != nil {
					return
				}
				resp.Body.Close()
				statuses[i] = resp.StatusCode
			}()
		}
		close(start)
		<-done
		<-done
		var ok, refused int
		for _, st := range statuses {
			switch st {
			case http.StatusSeeOther:
				ok++
			case http.StatusConflict, http.StatusForbidden:
				refused++
			}
		}
		var left int
		if err := db.QueryRow(context.Background(), `SELECT count(*) FROM dashboard_user WHERE role = 'admin' AND disabled_at IS NULL`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if ok != 1 || refused != 1 || left != 1 {
			t.Fatalf("round %d: answers %v, %d admin(s) left; want one change, one refusal, one admin", round, statuses, left)
		}
		// The one demoted is an admin again for the next round.
		for _, a := range admins {
			if _, err := voucherdRun(dbURL, "user", "role", "-email", a, "-role", "admin"); err != nil {
				t.Fatal(err)
			}
		}
	}
}
