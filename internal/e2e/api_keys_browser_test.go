package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"voucherd/internal/testenv"
)

// TestApiKeysPage_AnAdminMakesAKeySeesItOnceAndRevokesIt walks the API keys
// page in Chromium: an admin makes a key, which is shown once with a copy
// button and works as a bearer token at once; the page opened again never
// shows it again, only its prefix;
// revoked from the page, it is refused within a second. The page has no
// serious axe-core violation and fits 390 px.
func TestApiKeysPage_AnAdminMakesAKeySeesItOnceAndRevokesIt(t *testing.T) {
	s := sharedServer(t)
	email := "keys-admin-" + strings.ToLower(uniqueOrder()) + "@example.com"
	const pass = "the keys admin's password"
	addUser(t, nil, email, "Keys Admin", "admin", pass)
	code := bigVoucher(t, s)
	name := keyName("browser key")

	b := newTab(t, s, "api-keys")
	b.signIn(email, pass)
	b.step("open the API keys page", chromedp.Click(chromedp.CSS(`[data-testid=nav-api-keys]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=api-key-form]`)))
	b.axe("the API keys page")

	b.step("make a storefront key of 50 a second",
		chromedp.SendKeys(chromedp.CSS(`#key-name`), name),
		chromedp.SetValue(chromedp.CSS(`#key-role`), "storefront"),
		chromedp.SendKeys(chromedp.CSS(`#key-ratePerSecond`), "50"),
		chromedp.Click(chromedp.CSS(`[data-testid=api-key-submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=api-key-secret]`)),
	)
	secret := b.eval(`document.querySelector("[data-testid=api-key-secret]").value`)
	if !strings.HasPrefix(secret, "vk_live_") || len(secret) < len("vk_live_")+32 {
		t.Fatalf("the key shown: %q", secret)
	}
	b.step("copy it", chromedp.Click(chromedp.CSS(`[data-testid=api-key-copy]`)))
	testenv.Eventually(t, "the copy button says what it did", func() (bool, string) {
		said := b.text(`[data-copied-for=api-key-secret]`)
		return said != "", said
	})
	b.axe("the API keys page with a new key")
	b.phone("api-keys-390", `[data-testid=api-key-copy]`, `[data-testid=api-key-submit]`)
	if got := reserveWith(t, s, secret, code); got.Status != http.StatusCreated {
		t.Fatalf("a reserve with the key from the page: %d %s", got.Status, got.Raw)
	}

	// Never again: not on the page opened anew.
	b.open("/admin/api-keys", `[data-testid=api-keys-table]`)
	row := `[data-testid=api-key-row][data-name="` + name + `"]`
	if html := b.eval(`document.documentElement.outerHTML`); strings.Contains(html, secret) || strings.Contains(html, secret[len("vk_live_")+6:]) {
		t.Fatal("the page opened again shows the key")
	}
	if prefix := b.text(row + ` [data-testid=api-key-prefix]`); !strings.HasPrefix(secret, strings.TrimSuffix(prefix, "…")) || len(prefix) < len("vk_live_")+4 {
		t.Errorf("the key's prefix in the list: %q", prefix)
	}
	b.step("revoke it", chromedp.Click(chromedp.CSS(row+` [data-testid=api-key-revoke]`)), chromedp.WaitVisible(chromedp.CSS(`.notice, [role=status]`)))
	if got := b.text(row + ` [data-testid=api-key-status]`); !strings.HasPrefix(got, "revoked") {
		t.Errorf("the key's status after revoking: %q", got)
	}
	testenv.EventuallyWithin(t, time.Second, "the key revoked on the page refused", func() (bool, string) {
		got := reserveWith(t, s, secret, code)
		return got.Status == http.StatusUnauthorized, got.Raw
	})
}
