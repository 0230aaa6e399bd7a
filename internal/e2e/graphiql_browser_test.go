package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestGraphiQL_DocsListReserveVoucher: outside production GET /graphql is
// GraphiQL from the embedded npm files (nothing from another origin), it
// loads the schema through the depth limit with the development token in
// its headers pane, and its docs pane lists reserveVoucher. In production
// neither the page nor its files are served.
func TestGraphiQL_DocsListReserveVoucher(t *testing.T) {
	chromium := chromiumPath(t)
	// No tokens set: the development tokens, as with make run.
	s := startServer(t, map[string]string{"STOREFRONT_TOKENS": "", "ADMIN_TOKENS": ""})
	ctx := browser(t, chromium)
	shots := newShots(t)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 45*time.Second)
		defer cancel()
		if err := chromedp.Do(c, actions...); err != nil {
			shots.take(ctx, "failed-graphiql-"+strings.ReplaceAll(what, " ", "-"))
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))
	}
	step("open GraphiQL",
		chromedp.Navigate(s.URL+"/graphql"),
		chromedp.WaitVisible(chromedp.CSS(`.graphiql-container`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Show Documentation Explorer"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.graphiql-doc-explorer`)),
		// The root types are listed once the introspection query answered.
		poll(`[...document.querySelectorAll(".graphiql-doc-explorer a")].some(a => a.textContent === "Mutation")`),
		chromedp.Evaluate[chromedp.Void](`[...document.querySelectorAll(".graphiql-doc-explorer a")].find(a => a.textContent === "Mutation").click()`),
		poll(`document.querySelector(".graphiql-doc-explorer").textContent.includes("reserveVoucher")`),
	)
	shots.take(ctx, "graphiql-docs")

	// Every file the page loaded came from the server itself.
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resources, err := chromedp.Run(c, chromedp.Evaluate[[]string](`performance.getEntriesByType("resource").map(e => e.name)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(resources) < 4 {
		t.Errorf("the page loaded %d files, want GraphiQL, React, ReactDOM and the CSS at least: %v", len(resources), resources)
	}
	for _, r := range resources {
		if !strings.HasPrefix(r, s.URL+"/") {
			t.Errorf("GraphiQL loaded %s, which is not from the server", r)
		}
	}

	prod := startServer(t, map[string]string{"APP_ENV": "production"})
	status := func(url string) int {
		resp, err := httpClient.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/graphql", "/graphiql/graphiql.min.js", "/graphiql/react.production.min.js"} {
		if got := status(s.URL + path); got != http.StatusOK {
			t.Errorf("development GET %s: %d", path, got)
		}
		if got := status(prod.URL + path); got == http.StatusOK {
			t.Errorf("production GET %s: %d, want no page", path, got)
		}
	}
}
