package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"voucherd/internal/testenv"
)

// TestWebhooksPage_AnAdminAddsTestsResendsDisablesAndDeletesAnEndpoint walks
// the Webhooks page in Chromium: an admin adds an endpoint, whose secret is
// shown once with a copy button; a test event sent from the page reaches
// the receiver signed with that secret and shows in the deliveries with
// its status, HTTP code and attempts; resend sends it again; disable,
// enable and delete work, and every action is in the audit list. The pages
// have no serious axe-core violation and fit 390 px.
func TestWebhooksPage_AnAdminAddsTestsResendsDisablesAndDeletesAnEndpoint(t *testing.T) {
	dbURL, db := ownDatabase(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	s := startServer(t, env)
	email := "hooks-admin-" + strings.ToLower(uniqueOrder()) + "@example.com"
	const pass = "the hooks admin's password"
	addUser(t, env, email, "Hooks Admin", "admin", pass)
	rcv := newReceiver(t)

	b := newTab(t, s, "webhooks")
	b.signIn(email, pass)
	b.step("open the Webhooks page", chromedp.Click(chromedp.CSS(`[data-testid=nav-webhooks]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=webhook-form]`)))
	b.axe("the Webhooks page")

	b.step("add an endpoint of every event",
		chromedp.SendKeys(chromedp.CSS(`#hook-url`), rcv.URL),
		chromedp.SendKeys(chromedp.CSS(`#hook-description`), "the order service"),
		chromedp.Click(chromedp.CSS(`[data-testid=webhook-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=webhook-secret]`)),
	)
	secret := b.eval(`document.querySelector("[data-testid=webhook-secret]").value`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the secret shown: %q", secret)
	}
	b.step("copy it", chromedp.Click(chromedp.CSS(`[data-testid=webhook-copy]`)))
	testenv.Eventually(t, "the copy button says what it did", func() (bool, string) {
		said := b.text(`[data-copied-for=webhook-secret]`)
		return said != "", said
	})
	b.axe("the Webhooks page with a new secret")
	b.phone("webhooks-390", `[data-testid=webhook-copy]`, `[data-testid=webhook-submit]`)

	b.open("/admin/webhooks", `[data-testid=webhooks-table]`)
	if html := b.eval(`document.documentElement.outerHTML`); strings.Contains(html, secret) {
		t.Fatal("the page opened again shows the secret")
	}
	row := `[data-testid=webhook-row][data-url="` + rcv.URL + `"]`
	b.step("send a test event", chromedp.Click(chromedp.CSS(row+` [data-testid=webhook-test]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)))
	testenv.EventuallyWithin(t, 30*time.Second, "the test event delivered and shown so", func() (bool, string) {
		b.open(b.eval(`location.pathname`), `main`)
		got := b.text(`[data-testid=webhook-delivery-row] [data-testid=webhook-delivery-status]`)
		return got == "DELIVERED", got
	})
	if code := b.text(`[data-testid=webhook-delivery-code]`); code != "200" {
		t.Errorf("the delivery's HTTP code: %q", code)
	}
	if n := b.text(`[data-testid=webhook-delivery-attempts]`); n != "1" {
		t.Errorf("the delivery's attempts: %q", n)
	}
	b.axe("the deliveries page")
	b.phone("webhook-deliveries-390", `[data-testid=webhook-resend]`)
	rcv.mu.Lock()
	var test *delivered
	for _, d := range rcv.requests {
		if d.body.Type == "webhook.test" {
			test = &d
		}
	}
	rcv.mu.Unlock()
	if test == nil || !verifySignature(test.signature, test.raw, secret) {
		t.Fatalf("the test event at the receiver: %+v", test)
	}

	b.step("resend it", chromedp.Click(chromedp.CSS(`[data-testid=webhook-resend]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=notice]`)))
	testenv.EventuallyWithin(t, 30*time.Second, "the event sent again", func() (bool, string) {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.dupes == 1, ""
	})

	b.open("/admin/webhooks", `[data-testid=webhooks-table]`)
	b.step("disable it", chromedp.Click(chromedp.CSS(row+` [data-testid=webhook-disable]`)), chromedp.WaitVisible(chromedp.CSS(row+` [data-testid=webhook-enable]`)))
	if got := b.text(row + ` [data-testid=webhook-status]`); got != "disabled" {
		t.Errorf("status after disabling: %q", got)
	}
	b.step("enable it", chromedp.Click(chromedp.CSS(row+` [data-testid=webhook-enable]`)), chromedp.WaitVisible(chromedp.CSS(row+` [data-testid=webhook-disable]`)))
	b.step("delete it", chromedp.Click(chromedp.CSS(row+` [data-testid=webhook-delete]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=webhooks-none]`)))

	var actions string
	if err := db.QueryRow(context.Background(), `SELECT string_agg(action, ' ' ORDER BY id) FROM webhook_audit`).Scan(&actions); err != nil {
		t.Fatal(err)
	}
	if actions != "created tested resent disabled enabled deleted" {
		t.Errorf("audit: %q", actions)
	}
	if n := b.eval(`String(document.querySelectorAll("[data-testid=webhook-audit-row]").length)`); n != "6" {
		t.Errorf("%s audit rows on the page, want 6", n)
	}
}
