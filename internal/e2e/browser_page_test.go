package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tab is a Chromium tab of a browser test with the steps every such test
// takes: act and wait, read the page, check it with axe-core, fit a phone.
type tab struct {
	t     *testing.T
	ctx   context.Context
	s     *server
	shots shots
	name  string // prefixes screenshots
}

func newTab(t *testing.T, s *server, name string) *tab {
	return &tab{t: t, ctx: browser(t, chromiumPath(t)), s: s, shots: newShots(t), name: name}
}

// step runs actions, failing the test (with a screenshot) when they do not
// finish in 45 s.
func (b *tab) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	c, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		b.shots.take(b.ctx, b.name+"-failed-"+strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *tab) eval(js string) string {
	b.t.Helper()
	c, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	return strings.TrimSpace(b.eval(fmt.Sprintf(`(document.querySelector(%q) || {textContent: "(none)"}).textContent`, sel)))
}

// open navigates to a dashboard path and waits for sel.
func (b *tab) open(path, sel string) {
	b.t.Helper()
	b.step("open "+path, chromedp.Navigate(b.s.URL+path), chromedp.WaitVisible(chromedp.CSS(sel)))
}

// signIn signs in through the form and waits for the vouchers list.
func (b *tab) signIn(email, password string) {
	b.t.Helper()
	b.step("sign in as "+email,
		chromedp.Navigate(b.s.URL+"/admin/sign-in"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=sign-in-form]`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), email),
		chromedp.SendKeys(chromedp.CSS(`#password`), password),
		chromedp.Click(chromedp.CSS(`[data-testid=sign-in-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=voucher-table]`)),
	)
}

// axe runs axe-core on the page and fails on any serious or critical
// violation, naming the rule and the elements.
func (b *tab) axe(page string) {
	b.t.Helper()
	c, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(c, chromedp.Evaluate[bool](axeSource+";true")); err != nil {
		b.t.Fatalf("injecting axe-core into %s: %v", page, err)
	}
	out, err := chromedp.Run(c, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical")
			.map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("running axe-core on %s: %v", page, err)
	}
	var violations []struct {
		ID, Impact string
		Nodes      []string
	}
	if err := json.Unmarshal([]byte(out), &violations); err != nil {
		b.t.Fatalf("axe-core's answer on %s: %v (%s)", page, err, out)
	}
	for _, v := range violations {
		b.t.Errorf("axe-core on %s: %s violation %s at %v", page, v.Impact, v.ID, v.Nodes)
	}
	// What sticks out of the dark header lands light on the light page: axe
	// flags it only past some pixels, and a longer email or a font still
	// loading decides that, so the header is measured here.
	if over := b.eval(`(() => { const h = document.querySelector("header.top"); return h && h.scrollWidth > h.clientWidth ? h.scrollWidth + " px in " + h.clientWidth : "" })()`); over != "" {
		b.t.Errorf("on %s the header's content is wider than the header (%s): it overflows onto the page", page, over)
	}
}

// phone looks at the page at 390 px: nothing overflows the width, each of
// the buttons named is on screen, and a screenshot is kept. The width goes
// back to the desktop's after.
func (b *tab) phone(shot string, onScreen ...string) {
	b.t.Helper()
	b.step("a 390 px wide screen", chromedp.EmulateViewport(390, 844))
	defer b.step("a desktop screen", chromedp.EmulateViewport(1280, 900))
	if got := b.eval(`String(document.documentElement.scrollWidth)`); got != "390" {
		b.t.Errorf("%s at 390 px is %s px wide: it overflows", shot, got)
	}
	// The header's order lookup is usable, not squeezed beside the links.
	if got := b.eval(`(() => { const e = document.querySelector("#lookup-order"); return e ? String(e.getBoundingClientRect().width >= 195) : "true"; })()`); got != "true" {
		b.t.Errorf("%s at 390 px: the order lookup is narrower than half the screen", shot)
	}
	for _, sel := range onScreen {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return "missing"; const r = e.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= 390 ? "on" : "off " + r.left + ".." + r.right; })()`, sel)
		if got := b.eval(js); got != "on" {
			b.t.Errorf("%s at 390 px: %s is %s screen", shot, sel, got)
		}
	}
	b.shots.take(b.ctx, shot)
}

// dashboardClient is a second person on the dashboard, outside the
// browser: a cookie jar of their own, redirects not followed.
type dashboardClient struct {
	s    *server
	http *http.Client
}

func newDashboardClient(s *server) *dashboardClient {
	jar, _ := cookiejar.New(nil)
	return &dashboardClient{s: s, http: &http.Client{
		Jar:           jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// get returns a page's status and body.
func (c *dashboardClient) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := c.http.Get(c.s.URL + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// postForm gets the form at page (for its CSRF token and cookie) and posts
// values to action with it, as a browser does; it returns the status and
// body.
func (c *dashboardClient) postForm(t *testing.T, page, action string, values url.Values) (int, string) {
	t.Helper()
	_, body := c.get(t, page)
	m := csrfInput.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the form at %s carries no CSRF token: %s", page, body)
	}
	values.Set("csrf", m[1])
	resp, err := c.http.PostForm(c.s.URL+action, values)
	if err != nil {
		t.Fatalf("POST %s: %v", action, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// signIn posts the sign-in form; the session stays in the jar.
func (c *dashboardClient) signIn(t *testing.T, email, password string) int {
	t.Helper()
	status, _ := c.postForm(t, "/admin/sign-in", "/admin/sign-in", url.Values{"email": {email}, "password": {password}})
	return status
}

// status is the status of a GET: 200, 403 for a role that may not, 303 to
// the sign-in page for a session that ended.
func (c *dashboardClient) status(t *testing.T, path string) int {
	t.Helper()
	status, _ := c.get(t, path)
	return status
}
