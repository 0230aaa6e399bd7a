package graph

import (
	"context"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// TestBoundedCache_KeepsNoLongTexts: the query and APQ caches hold 1000
// entries each; a text over maxCachedQueryBytes is not kept, so 1000
// distinct 1 MiB texts cannot pin 2 GiB.
func TestBoundedCache_KeepsNoLongTexts(t *testing.T) {
	ctx := context.Background()
	c := boundedCache[string]{Cache: lru.New[string](10), size: func(_, v string) int { return len(v) }}
	short, long := strings.Repeat("a", maxCachedQueryBytes), strings.Repeat("a", maxCachedQueryBytes+1)
	c.Add(ctx, "short", short)
	c.Add(ctx, "long", long)
	if _, ok := c.Get(ctx, "short"); !ok {
		t.Error("a text of maxCachedQueryBytes is not cached")
	}
	if _, ok := c.Get(ctx, "long"); ok {
		t.Error("a text over maxCachedQueryBytes is cached")
	}
}

// TestDocumentLimit_CountsFragmentSpreadsAsTheirFields: a spread counts as
// the fields it brings, each fragment counted once however often spread.
func TestDocumentLimit_CountsFragmentSpreadsAsTheirFields(t *testing.T) {
	spread := func(n int) string {
		return "{ " + strings.Repeat("...F ", n) + "} fragment F on Query { a b c d }"
	}
	for _, tc := range []struct {
		desc    string
		query   string
		refused bool
	}{
		{"124 spreads of 4 fields, 4 more for the fragment alone", spread(124), false},
		{"125 spreads of 4 fields, 4 more for the fragment alone", spread(125), true},
		{"a cycle counts nothing twice", "{ ...A } fragment A on Query { a ...B } fragment B on Query { b ...A }", false},
		{"an unknown fragment counts nothing", "{ ...Nope }", false},
	} {
		err := checkDocument(tc.query, false)
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, refused want %v", tc.desc, err, tc.refused)
		}
	}
}

// BenchmarkDocumentLimit: what the limit adds to the storefront's reserve,
// whose text is in the query cache after its first request (one cache
// look-up), and to a cache miss (a lexing pass, a parse and a count).
func BenchmarkDocumentLimit(b *testing.B) {
	ctx := context.Background()
	cache := lru.New[*ast.QueryDocument](1000)
	doc, err := parser.ParseQuery(&ast.Source{Input: reserveMutation})
	if err != nil {
		b.Fatal(err)
	}
	cache.Add(ctx, reserveMutation, doc)
	d := documentLimit{cache: cache, production: true}
	b.Run("reserve, a query-cache hit (every request)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := d.MutateOperationParameters(ctx, &graphql.RawParams{Query: reserveMutation}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reserve, a query-cache miss", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := checkDocument(reserveMutation, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
