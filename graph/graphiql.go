package graph

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"

	"github.com/vektah/gqlparser/v2/ast"
)

// graphiqlFiles are GraphiQL and React as published on npm (see
// graphiql/README.md), embedded so the page loads nothing from elsewhere.
//
//go:embed graphiql/*.js graphiql/*.css
var graphiqlFiles embed.FS

// GraphiQLAssets is the path prefix of the files the page loads.
const GraphiQLAssets = "/graphiql/"

var graphiqlPage = template.Must(template.New("graphiql").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>GraphiQL · voucherd</title>
<style>body { margin: 0; } #graphiql { height: 100vh; }</style>
<link rel="stylesheet" href="{{.Assets}}graphiql.min.css">
<script src="{{.Assets}}react.production.min.js"></script>
<script src="{{.Assets}}react-dom.production.min.js"></script>
<script src="{{.Assets}}graphiql.min.js"></script>
</head>
<body>
<div id="graphiql">Loading GraphiQL…</div>
<script>
  // The pane's headers, also given to the fetcher: GraphiQL fetches the
  // schema before its headers pane is read.
  let headers = {};
  try { headers = JSON.parse({{.Headers}}); } catch (e) {}
  const fetcher = GraphiQL.createFetcher({ url: {{.Endpoint}}, headers: headers });
  ReactDOM.createRoot(document.getElementById("graphiql")).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      headers: {{.Headers}},
      isHeadersEditorEnabled: true,
      shouldPersistHeaders: false,
      defaultEditorToolsVisibility: "headers",
    }),
  );
</script>
</body>
</html>
`))

// Playground serves GraphiQL at GET /graphql outside production, for
// requests to POST endpoint. headers is the headers pane's initial JSON
// (the development token, so the schema loads at once), or "" for none:
// the bearer token is typed there.
func Playground(endpoint, headers string) http.Handler {
	if headers == "" {
		headers = "{\n  \"Authorization\": \"Bearer \"\n}"
	}
	data := struct{ Assets, Endpoint, Headers string }{GraphiQLAssets, endpoint, headers}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = graphiqlPage.Execute(w, data)
	})
}

// PlaygroundAssets serves the page's files under GraphiQLAssets.
func PlaygroundAssets() http.Handler {
	sub, err := fs.Sub(graphiqlFiles, "graphiql")
	if err != nil {
		panic(err) // the embedded directory is fixed at build time
	}
	return http.StripPrefix(GraphiQLAssets, http.FileServerFS(sub))
}

// onlyIntrospection reports whether every root selection of set is
// introspection (__schema, __type, __typename), directly or through
// fragments.
func onlyIntrospection(set ast.SelectionSet) bool {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name != "__schema" && s.Name != "__type" && s.Name != "__typename" {
				return false
			}
		case *ast.InlineFragment:
			if !onlyIntrospection(s.SelectionSet) {
				return false
			}
		case *ast.FragmentSpread:
			if s.Definition == nil || !onlyIntrospection(s.Definition.SelectionSet) {
				return false
			}
		}
	}
	return len(set) > 0
}
