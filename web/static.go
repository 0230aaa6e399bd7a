package web

import (
	"embed"
	"io/fs"
	"net/http"
)

// static holds the dashboard's CSS, its script and htmx (vendored from npm,
// its version in the file's first line): nothing comes from a CDN.
//
//go:embed static
var static embed.FS

// staticFiles serves web/static under /admin/static/, cacheable for an hour.
func staticFiles() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/admin/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}
