package graph

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"voucherd/graph/generated"
	"voucherd/internal/voucher"
)

// Limits refused before any work is done.
const (
	// MaxComplexity lets the largest real query (a default page of 50
	// vouchers with every field, about 1,400) through and refuses batches
	// such as 500 aliased mutations (complexity.go prices pages and writes).
	MaxComplexity = 2000
	// MaxDepth refuses queries nested deeper than any real one.
	MaxDepth = 8
)

// Options configure the GraphQL handler.
type Options struct {
	Logger *slog.Logger
	// Production (APP_ENV=production) refuses introspection and leaves the
	// "Did you mean" suggestions out of validation errors.
	Production bool
	// Backoffice serves the admin mutations (updateVoucher, endVoucher).
	Backoffice *voucher.Backoffice
	// ApiKeys serves createApiKey, revokeApiKey and apiKeys.
	ApiKeys *voucher.ApiKeys
	// Webhooks serves the webhook endpoints and deliveries.
	Webhooks *voucher.Webhooks
	// generalOnly leaves the storefront's fast path out (fastpath.go): the
	// differential tests compare the two.
	generalOnly bool
	// maxComplexity replaces MaxComplexity when not 0 (tests).
	maxComplexity int
}

// NewHandler returns the POST /graphql handler over the service.
func NewHandler(svc *voucher.Service, opts Options) http.Handler {
	h, _ := newHandler(svc, opts)
	return h
}

// newHandler is NewHandler, with its fast path (nil with generalOnly).
func newHandler(svc *voucher.Service, opts Options) (http.Handler, *fastPath) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	resolver := &Resolver{Service: svc, Backoffice: opts.Backoffice, ApiKeys: opts.ApiKeys, Webhooks: opts.Webhooks, Logger: logger, Production: opts.Production}
	cfg := generated.Config{Resolvers: resolver, Complexity: complexityRoot()}
	es := generated.NewExecutableSchema(cfg)
	srv := handler.New(es)
	// Parsed and validated operations are cached: a flash sale repeats one
	// operation text thousands of times a second.
	queries := boundedCache[*ast.QueryDocument]{
		Cache: lru.New[*ast.QueryDocument](1000),
		size:  func(query string, _ *ast.QueryDocument) int { return len(query) },
	}
	srv.SetQueryCache(queries)
	srv.SetParserTokenLimit(MaxTokens)
	srv.SetValidationRulesFn(validationRules(opts.Production))
	srv.Use(extension.AutomaticPersistedQuery{Cache: boundedCache[string]{
		Cache: lru.New[string](1000),
		size:  func(_, query string) int { return len(query) },
	}})
	// After the APQ extension, which may fill in the query from its cache.
	srv.Use(documentLimit{cache: queries, production: opts.Production})
	if !opts.Production {
		srv.Use(extension.Introspection{})
	}
	srv.Use(&strictVariables{})
	srv.Use(loaders{})
	srv.Use(extension.FixedComplexityLimit(cmp.Or(opts.maxComplexity, MaxComplexity)))
	srv.Use(depthLimit{max: MaxDepth, introspection: !opts.Production})
	present := errorPresenter(logger, opts.Production)
	recoverFn := func(ctx context.Context, p any) error {
		logger.ErrorContext(ctx, "panic in a GraphQL resolver", "panic", p)
		return errors.New("internal error")
	}
	srv.SetErrorPresenter(present)
	srv.SetRecoverFunc(recoverFn)
	var fast *fastPath
	if !opts.generalOnly {
		fast = newFastPath(resolver.Mutation(), present, recoverFn, opts.Production)
		srv.Use(planner{fast}) // last: after every limit
	}
	srv.AddTransport(postTransport{fast: fast, schema: es.Schema()})
	return srv, fast
}

// errorPresenter gives every GraphQL error a code in extensions.code and
// hides the cause of anything unexpected (logged instead).
func errorPresenter(logger *slog.Logger, production bool) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		var verr *voucher.Error
		if errors.As(err, &verr) && verr.Code != voucher.Internal {
			gerr := graphql.DefaultErrorPresenter(ctx, err)
			gerr.Message = verr.PublicMessage(production)
			gerr.Extensions = map[string]any{"code": string(verr.Code)}
			if verr.Field != "" {
				gerr.Extensions["field"] = truncate(verr.Field)
			}
			return gerr
		}
		var gerr *gqlerror.Error
		if errors.As(err, &gerr) && gerr.Err == nil {
			// Parse, validation and limit errors: they describe the
			// request, not the server. They may quote it (a name, a
			// value, a variable's path), so only so much of it.
			return shortened(gerr)
		}
		if errors.As(err, &gerr) && errors.As(gerr.Err, &verr) {
			return errorPresenter(logger, production)(ctx, gerr.Err)
		}
		logger.ErrorContext(ctx, "GraphQL request failed", "err", err)
		out := &gqlerror.Error{Message: "internal error", Extensions: map[string]any{"code": string(voucher.Internal)}}
		if fc := graphql.GetFieldContext(ctx); fc != nil {
			out.Path = fc.Path()
		}
		return out
	}
}

// depthLimit refuses an operation whose selections nest deeper than max.
// With introspection (outside production) an operation that selects only
// introspection at its root is let through: the standard introspection
// query, which GraphiQL sends, nests 13 levels (its type references), and
// reaches no data; the token and field limits still bound it.
type depthLimit struct {
	max           int
	introspection bool
}

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = depthLimit{}

func (depthLimit) ExtensionName() string                   { return "DepthLimit" }
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }
func (d depthLimit) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	op := opCtx.Doc.Operations.ForName(opCtx.OperationName)
	if op == nil {
		return nil
	}
	if d.introspection && onlyIntrospection(op.SelectionSet) {
		return nil
	}
	if depth := selectionDepth(op.SelectionSet, 0, d.max+1); depth > d.max {
		err := gqlerror.Errorf("operation is nested %d levels deep, which exceeds the limit of %d", depth, d.max)
		errcode.Set(err, "DEPTH_LIMIT_EXCEEDED")
		return err
	}
	return nil
}

// selectionDepth measures nesting, stopping at stop so a hostile query costs
// little to measure.
func selectionDepth(set ast.SelectionSet, depth, stop int) int {
	if depth >= stop {
		return depth
	}
	deepest := depth
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			if len(s.SelectionSet) == 0 {
				d = depth + 1
			} else {
				d = selectionDepth(s.SelectionSet, depth+1, stop)
			}
		case *ast.InlineFragment:
			d = selectionDepth(s.SelectionSet, depth, stop)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				d = selectionDepth(s.Definition.SelectionSet, depth, stop)
			}
		}
		deepest = max(deepest, d)
	}
	return deepest
}

// maxMessageBytes bounds what an error quotes of the request: a message
// naming a 1 MiB string would otherwise be 1 MiB.
const maxMessageBytes = 512

// shortened cuts the message and the path names of err to maxMessageBytes.
func shortened(err *gqlerror.Error) *gqlerror.Error {
	err.Message = truncate(err.Message)
	for i, p := range err.Path {
		if name, ok := p.(ast.PathName); ok && len(name) > maxMessageBytes {
			err.Path[i] = ast.PathName(truncate(string(name)))
		}
	}
	return err
}

// truncate cuts s to at most maxMessageBytes on a rune boundary, marking the
// cut with an ellipsis.
func truncate(s string) string {
	if len(s) <= maxMessageBytes {
		return s
	}
	cut := maxMessageBytes - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
