package graph

import (
	"context"
	"fmt"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
	"github.com/vektah/gqlparser/v2/parser"
)

// Limits on the document itself, checked before gqlgen validates it.
// Validation is quadratic in the fields of a document (OverlappingFields-
// CanBeMerged compares every pair that shares a response name: 500 aliased
// voucher fields made 124,750 errors, 20,000 `a: __typename` took 22.7 s),
// and the walkers after it (complexity, depth, execution) follow fragment
// spreads without memory, so fragments spreading one another twice cost 2^n.
// Every real operation is far below these.
const (
	// MaxTokens bounds the lexical tokens (comments included) of a document:
	// the largest real one, GraphiQL's introspection query, has about 400.
	MaxTokens = 5000
	// MaxSelections bounds the fields of a document with every fragment
	// spread counted as the fields it brings: validating 500 costs at most
	// about 0.1 s of a core (BenchmarkHostileRequests), and the complexity
	// limit refuses any operation of more than 200 fields anyway.
	MaxSelections = 500
	// MaxNameLength bounds every name (field, alias, argument, type,
	// fragment, variable, directive, enum value): the validator's "did you
	// mean" suggestions compare a wrong name with every candidate, at a cost
	// of the product of their lengths.
	MaxNameLength = 128
)

// codeSizeLimit is the extensions.code of a document refused by the limits
// above; codeIntrospectionDisabled that of introspection in production.
const (
	codeSizeLimit             = "SIZE_LIMIT_EXCEEDED"
	codeIntrospectionDisabled = "INTROSPECTION_DISABLED"
)

func init() {
	// Refusals of the request itself, like parse and validation failures:
	// HTTP 422.
	errcode.RegisterErrorType(codeSizeLimit, errcode.KindProtocol)
	errcode.RegisterErrorType(codeIntrospectionDisabled, errcode.KindProtocol)
}

// documentLimit refuses, before gqlgen parses and validates it, a document
// over the limits above and, in production, one that asks for introspection
// (__schema or __type), with a GraphQL error in place of gqlgen's field
// error "introspection disabled", which reads as a fault of the server.
// Its own parse costs a cache miss only: a text in the query cache was
// checked when it was first seen, so the hot path pays one cache look-up.
type documentLimit struct {
	cache      graphql.Cache[*ast.QueryDocument]
	production bool
}

var _ interface {
	graphql.OperationParameterMutator
	graphql.HandlerExtension
} = documentLimit{}

func (documentLimit) ExtensionName() string                   { return "DocumentLimit" }
func (documentLimit) Validate(graphql.ExecutableSchema) error { return nil }

func (d documentLimit) MutateOperationParameters(ctx context.Context, params *graphql.RawParams) *gqlerror.Error {
	if params.Query == "" {
		return nil // gqlgen answers "no operation provided"
	}
	if _, ok := d.cache.Get(ctx, params.Query); ok {
		return nil
	}
	return checkDocument(params.Query, d.production)
}

// checkDocument is documentLimit's check of one query text. Its cost grows
// with the length of the text and is bounded by MaxTokens tokens.
func checkDocument(query string, production bool) *gqlerror.Error {
	src := &ast.Source{Input: query}
	if err := countTokens(src); err != nil {
		return err
	}
	doc, err := parser.ParseQuery(src)
	if err != nil {
		// gqlgen parses it again and answers the same parse error.
		return nil
	}
	s := shape{fragments: make(map[string]*ast.FragmentDefinition, len(doc.Fragments))}
	for _, f := range doc.Fragments {
		if _, ok := s.fragments[f.Name]; !ok {
			s.fragments[f.Name] = f
		}
	}
	// The validator walks every operation, then every fragment on its own.
	n := 0
	for _, op := range doc.Operations {
		n = s.add(n, s.selections(op.SelectionSet))
	}
	for _, f := range doc.Fragments {
		n = s.add(n, s.fragment(f.Name))
	}
	if n > MaxSelections {
		return limitError(codeSizeLimit, "the document has more than %d fields (each fragment spread counted as its fields), the limit", MaxSelections)
	}
	if err := refuseWideIntegers(doc); err != nil {
		return err
	}
	if production {
		for _, op := range doc.Operations {
			if op.Operation == ast.Query && s.asksIntrospection(op.SelectionSet, map[string]bool{}) {
				return limitError(codeIntrospectionDisabled, "introspection is disabled on this server")
			}
		}
	}
	return nil
}

// countTokens refuses a text of more than MaxTokens tokens or with a name
// longer than MaxNameLength, reading no further than the token that breaks
// the limit. A lexical error is left to the parser to report.
func countTokens(src *ast.Source) *gqlerror.Error {
	lex := lexer.New(src)
	for n := 0; ; n++ {
		tok, err := lex.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return nil
		}
		if n >= MaxTokens {
			return limitError(codeSizeLimit, "the document has more than %d tokens, the limit", MaxTokens)
		}
		if tok.Kind == lexer.Name && len(tok.Value) > MaxNameLength {
			return limitError(codeSizeLimit, "the document has a name longer than %d characters, the limit", MaxNameLength)
		}
	}
}

func limitError(code, format string, args ...any) *gqlerror.Error {
	err := &gqlerror.Error{Message: fmt.Sprintf(format, args...)}
	errcode.Set(err, code)
	return err
}

// shape counts the fields of a document with fragment spreads expanded,
// each fragment counted once (memoized), so the count costs the size of the
// document however the fragments multiply.
type shape struct {
	fragments map[string]*ast.FragmentDefinition
	sizes     map[string]int
}

// add saturates just above MaxSelections: an expanded count can overflow.
func (s *shape) add(a, b int) int { return min(a+b, MaxSelections+1) }

func (s *shape) selections(set ast.SelectionSet) int {
	n := 0
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			n = s.add(n, s.add(1, s.selections(sel.SelectionSet)))
		case *ast.InlineFragment:
			n = s.add(n, s.selections(sel.SelectionSet))
		case *ast.FragmentSpread:
			n = s.add(n, s.fragment(sel.Name))
		}
		if n > MaxSelections {
			return n
		}
	}
	return n
}

// fragment is the expanded size of the named fragment; 0 for an unknown
// one, and for a spread inside its own cycle (the validator refuses both).
func (s *shape) fragment(name string) int {
	if n, ok := s.sizes[name]; ok {
		return n
	}
	f, ok := s.fragments[name]
	if !ok {
		return 0
	}
	if s.sizes == nil {
		s.sizes = map[string]int{}
	}
	s.sizes[name] = 0 // in progress: a cycle adds nothing
	n := s.selections(f.SelectionSet)
	s.sizes[name] = n
	return n
}

// asksIntrospection reports whether a root selection set of a query selects
// __schema or __type, through inline fragments and fragment spreads.
func (s *shape) asksIntrospection(set ast.SelectionSet, seen map[string]bool) bool {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if sel.Name == "__schema" || sel.Name == "__type" {
				return true
			}
		case *ast.InlineFragment:
			if s.asksIntrospection(sel.SelectionSet, seen) {
				return true
			}
		case *ast.FragmentSpread:
			if f, ok := s.fragments[sel.Name]; ok && !seen[sel.Name] {
				seen[sel.Name] = true
				if s.asksIntrospection(f.SelectionSet, seen) {
					return true
				}
			}
		}
	}
	return false
}

// boundedCache keeps only entries of at most maxCachedQueryBytes: the query
// and APQ caches hold 1000 entries each, and 1000 distinct texts of 1 MiB
// would keep 2 GiB. Longer texts (none real) are checked again every time.
type boundedCache[T any] struct {
	graphql.Cache[T]
	size func(key string, value T) int
}

// maxCachedQueryBytes is 8 KiB: GraphiQL's introspection query is about 2.
const maxCachedQueryBytes = 8 << 10

func (c boundedCache[T]) Add(ctx context.Context, key string, value T) {
	if c.size(key, value) <= maxCachedQueryBytes {
		c.Cache.Add(ctx, key, value)
	}
}

// refuseWideIntegers refuses an integer literal of the document that no
// type of the API takes (beyond 64 bits) as INVALID_INPUT on its field, as
// the same number in a variable is: gqlparser cannot read such a literal and
// would refuse the whole input object as a validation failure naming no
// field. Narrower limits (Int's 32 bits, each field's range) are the
// scalars' and the domain's, which give their own INVALID_INPUT.
func refuseWideIntegers(doc *ast.QueryDocument) *gqlerror.Error {
	var found *gqlerror.Error
	eachValue(doc, func(v *ast.Value, field string) bool {
		if v.Kind != ast.IntValue {
			return false
		}
		if _, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
			return false
		}
		// The path is the document's, not yet validated: names of input
		// fields that may not exist, nested at will.
		field = truncate(field)
		found = &gqlerror.Error{
			Message:    field + " is outside the integers this API takes (at most 9223372036854775807 in size)",
			Extensions: map[string]any{"code": "INVALID_INPUT", "field": field},
		}
		if v.Position != nil {
			found.Locations = []gqlerror.Location{{Line: v.Position.Line, Column: v.Position.Column}}
		}
		return true
	})
	return found
}

// eachValue calls fn with every value written in doc (variables' defaults,
// the arguments of fields and directives, in operations and fragments, and
// the values nested in them), each with its path (input, input.code,
// items[0]), until fn returns true.
func eachValue(doc *ast.QueryDocument, fn func(v *ast.Value, path string) (stop bool)) {
	stopped := false
	var visit func(v *ast.Value, path string)
	visit = func(v *ast.Value, path string) {
		if v == nil || stopped {
			return
		}
		if stopped = fn(v, path); stopped {
			return
		}
		for i, c := range v.Children {
			if v.Kind == ast.ListValue {
				visit(c.Value, path+"["+strconv.Itoa(i)+"]")
			} else {
				visit(c.Value, path+"."+c.Name)
			}
		}
	}
	args := func(list ast.ArgumentList) {
		for _, a := range list {
			visit(a.Value, a.Name)
		}
	}
	directives := func(list ast.DirectiveList) {
		for _, d := range list {
			args(d.Arguments)
		}
	}
	var walk func(set ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch sel := sel.(type) {
			case *ast.Field:
				args(sel.Arguments)
				directives(sel.Directives)
				walk(sel.SelectionSet)
			case *ast.InlineFragment:
				directives(sel.Directives)
				walk(sel.SelectionSet)
			case *ast.FragmentSpread:
				directives(sel.Directives)
			}
		}
	}
	for _, op := range doc.Operations {
		for _, v := range op.VariableDefinitions {
			visit(v.DefaultValue, v.Variable)
		}
		directives(op.Directives)
		walk(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		directives(f.Directives)
		walk(f.SelectionSet)
	}
}
