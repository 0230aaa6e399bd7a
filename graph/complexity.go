package graph

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// complexityLimit refuses an operation whose complexity exceeds limit, with
// the error of gqlgen's extension.FixedComplexityLimit (same message, same
// COMPLEXITY_LIMIT_EXCEEDED code). gqlgen computes the complexity again on
// every request, although without custom complexity functions it depends on
// the operation alone; this keeps it per parsed operation (the query cache
// hands out the same *ast.OperationDefinition for the same text and
// operation name). With a custom complexity function, which may read
// arguments and so variables, it computes it on every request as gqlgen does.
// Unlike gqlgen's it does not record ComplexityStats in the operation's
// stats: nothing here reads them.
type complexityLimit struct {
	limit int
	// perOperation is false when a complexity function is configured.
	perOperation bool
	es           graphql.ExecutableSchema

	cached sync.Map // *ast.OperationDefinition -> int
	size   atomic.Int64
}

// maxCachedComplexities bounds the cache: operations evicted from the query
// cache (1000 documents) are parsed again into new pointers, so the cache is
// emptied when it has twice that many.
const maxCachedComplexities = 2000

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = (*complexityLimit)(nil)

func newComplexityLimit(limit int, complexityFuncs any) *complexityLimit {
	return &complexityLimit{limit: limit, perOperation: !anyFuncSet(reflect.ValueOf(complexityFuncs))}
}

// anyFuncSet reports whether v (generated.ComplexityRoot: structs of funcs)
// holds a non-nil func anywhere.
func anyFuncSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Func:
		return !v.IsNil()
	case reflect.Struct:
		for i := range v.NumField() {
			if anyFuncSet(v.Field(i)) {
				return true
			}
		}
	}
	return false
}

func (*complexityLimit) ExtensionName() string { return "ComplexityLimit" }

func (c *complexityLimit) Validate(schema graphql.ExecutableSchema) error {
	c.es = schema
	return nil
}

func (c *complexityLimit) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	n := c.complexity(ctx, opCtx.Operation, opCtx.Variables)
	if n > c.limit {
		err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d", n, c.limit)
		errcode.Set(err, "COMPLEXITY_LIMIT_EXCEEDED")
		return err
	}
	return nil
}

func (c *complexityLimit) complexity(ctx context.Context, op *ast.OperationDefinition, vars map[string]any) int {
	if !c.perOperation {
		return complexity.Calculate(ctx, c.es, op, vars)
	}
	if n, ok := c.cached.Load(op); ok {
		return n.(int)
	}
	n := complexity.Calculate(ctx, c.es, op, vars)
	if c.size.Add(1) > maxCachedComplexities {
		c.cached.Clear()
		c.size.Store(1)
	}
	c.cached.Store(op, n)
	return n
}
