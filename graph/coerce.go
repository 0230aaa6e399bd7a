package graph

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"voucherd/internal/voucher"
)

// strictVariables coerces the operation's variables as the GraphQL
// specification says, where gqlparser is lenient: a String (or an enum)
// takes only a JSON string, not a number (a json.Number is a Go string to
// it), an ID a string or an integer, and an enum value is spelled exactly
// (gqlparser compares without case). What gqlparser itself refuses is made
// the same error by variableError. Int, Money and Time are read strictly by
// their scalars (model/scalars.go). Every refusal is INVALID_INPUT naming
// the input field, before any work.
type strictVariables struct{ schema *ast.Schema }

var _ interface {
	graphql.OperationContextMutator
	graphql.HandlerExtension
} = (*strictVariables)(nil)

func (*strictVariables) ExtensionName() string { return "StrictVariables" }

func (s *strictVariables) Validate(es graphql.ExecutableSchema) error {
	s.schema = es.Schema()
	return nil
}

func (s *strictVariables) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	for _, def := range opCtx.Operation.VariableDefinitions {
		v, ok := opCtx.Variables[def.Variable]
		if !ok {
			continue
		}
		if path, typ, bad := s.check(def.Type, v, ast.Path{ast.PathName(def.Variable)}); bad {
			return invalidInput(opCtx.Operation, path, typ)
		}
	}
	return nil
}

// check walks a value of type t and returns the path and type of the first
// value that the specification refuses.
func (s *strictVariables) check(t *ast.Type, v any, path ast.Path) (ast.Path, string, bool) {
	if v == nil {
		return nil, "", false // nullability is gqlparser's
	}
	if t.Elem != nil {
		list, ok := v.([]any)
		if !ok {
			return s.check(t.Elem, v, path) // a single value for a list
		}
		for i, e := range list {
			if p, typ, bad := s.check(t.Elem, e, append(path, ast.PathIndex(i))); bad {
				return p, typ, true
			}
		}
		return nil, "", false
	}
	def := s.schema.Types[t.NamedType]
	if def == nil {
		return nil, "", false
	}
	switch def.Kind {
	case ast.Enum:
		str, ok := v.(string)
		if !ok || def.EnumValues.ForName(str) == nil {
			return path, def.Name, true
		}
	case ast.InputObject:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, "", false
		}
		for _, f := range def.Fields {
			if p, typ, bad := s.check(f.Type, obj[f.Name], append(path, ast.PathName(f.Name))); bad {
				return p, typ, true
			}
		}
	case ast.Scalar:
		switch def.Name {
		case "String":
			if _, ok := v.(string); !ok {
				return path, def.Name, true
			}
		case "ID":
			switch v := v.(type) {
			case string:
			case json.Number:
				if _, err := strconv.ParseInt(string(v), 10, 64); err != nil {
					return path, def.Name, true
				}
			default:
				return path, def.Name, true
			}
		}
	}
	return nil, "", false
}

// inputErrors makes a refusal of an input value INVALID_INPUT naming the
// input field, as the strict checks above do: what gqlparser refuses of the
// variables (its errors' paths start with "variable"), and a document whose
// only validation errors are literals of the wrong type (an enum value in
// another case, a string for an Int), found by their location. Other errors
// are returned unchanged.
func inputErrors(schema *ast.Schema, query string, op *ast.OperationDefinition, errs gqlerror.List) gqlerror.List {
	if len(errs) == 0 {
		return errs
	}
	first := errs[0]
	if op != nil && len(errs) == 1 && len(first.Path) >= 2 && first.Path[0] == ast.PathName("variable") {
		return gqlerror.List{invalidInput(op, knownPath(schema, op, first.Path[1:]), "")}
	}
	for _, err := range errs {
		if err.Rule != rules.ValuesOfCorrectTypeRule.Name || len(err.Locations) == 0 {
			return errs
		}
	}
	doc, perr := parser.ParseQuery(&ast.Source{Input: query})
	if perr != nil {
		return errs
	}
	at := first.Locations[0]
	field, leaf := literalField(doc, at.Line, at.Column)
	if field == "" || !leaf {
		// An input object with a field its type lacks, or without one it
		// needs: a validation error, with its suggestions outside
		// production.
		return errs
	}
	field = truncate(field)
	return gqlerror.List{{
		Message:    field + " is not a value of the type it takes",
		Locations:  first.Locations,
		Extensions: map[string]any{"code": string(voucher.InvalidInput), "field": field},
	}}
}

// literalField names the argument value of doc at line:column
// (input.discountType), and says whether it is a leaf (not an object or a
// list).
func literalField(doc *ast.QueryDocument, line, column int) (found string, leaf bool) {
	eachValue(doc, func(v *ast.Value, path string) bool {
		if v.Position == nil || v.Position.Line != line || v.Position.Column != column {
			return false
		}
		found, leaf = path, v.Kind != ast.ObjectValue && v.Kind != ast.ListValue
		return true
	})
	return found, leaf
}

// knownPath is path (a variable's name, then the path inside it) up to its
// first step that the variable's type does not have: a key that the input
// type does not define names the object that holds it, not the key, which
// is the request's.
func knownPath(schema *ast.Schema, op *ast.OperationDefinition, path ast.Path) ast.Path {
	name, _ := path[0].(ast.PathName)
	def := op.VariableDefinitions.ForName(string(name))
	if def == nil {
		return path[:1]
	}
	t := def.Type
	for i, p := range path[1:] {
		switch p := p.(type) {
		case ast.PathIndex:
			if t.Elem == nil {
				return path[:i+1]
			}
			t = t.Elem
		case ast.PathName:
			typ := schema.Types[t.NamedType]
			if t.Elem != nil || typ == nil || typ.Kind != ast.InputObject || typ.Fields.ForName(string(p)) == nil {
				return path[:i+1]
			}
			t = typ.Fields.ForName(string(p)).Type
		}
	}
	return path
}

// invalidInput is INVALID_INPUT for the value at path (a variable's name,
// then the path inside it), named as the input field where the variable is
// used (input.orderId), with a message that quotes nothing of the value.
func invalidInput(op *ast.OperationDefinition, path ast.Path, typ string) *gqlerror.Error {
	field := inputField(op, path)
	msg := field + " is not a value of its type"
	if typ != "" {
		msg = field + " must be a " + typ + " as the GraphQL specification reads one (a String takes only a JSON string, an enum value is spelled exactly)"
	}
	return &gqlerror.Error{Message: msg, Extensions: map[string]any{"code": string(voucher.InvalidInput), "field": field}}
}

// inputField names the value at path: the argument (and input fields) where
// the variable path[0] is used, then the rest of the path. Names come from
// the document and the schema, each at most MaxNameLength, and the path
// follows the input types, so the name is bounded; truncate bounds it too.
func inputField(op *ast.OperationDefinition, path ast.Path) string {
	name, _ := path[0].(ast.PathName)
	var b strings.Builder
	if usage := variableUsage(op.SelectionSet, string(name), map[string]bool{}); usage != "" {
		b.WriteString(usage)
	} else {
		b.WriteString(string(name))
	}
	for _, p := range path[1:] {
		switch p := p.(type) {
		case ast.PathName:
			b.WriteString("." + string(p))
		case ast.PathIndex:
			b.WriteString("[" + strconv.Itoa(int(p)) + "]")
		}
	}
	return truncate(b.String())
}

// variableUsage is the path of the first argument value that is the
// variable: "input", or "input.code" inside an object literal.
func variableUsage(set ast.SelectionSet, variable string, seen map[string]bool) string {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			for _, a := range sel.Arguments {
				if p := valueUsage(a.Value, variable, a.Name); p != "" {
					return p
				}
			}
			if p := variableUsage(sel.SelectionSet, variable, seen); p != "" {
				return p
			}
		case *ast.InlineFragment:
			if p := variableUsage(sel.SelectionSet, variable, seen); p != "" {
				return p
			}
		case *ast.FragmentSpread:
			if sel.Definition != nil && !seen[sel.Name] {
				seen[sel.Name] = true
				if p := variableUsage(sel.Definition.SelectionSet, variable, seen); p != "" {
					return p
				}
			}
		}
	}
	return ""
}

func valueUsage(v *ast.Value, variable, path string) string {
	if v == nil {
		return ""
	}
	switch v.Kind {
	case ast.Variable:
		if v.Raw == variable {
			return path
		}
	case ast.ObjectValue:
		for _, c := range v.Children {
			if p := valueUsage(c.Value, variable, path+"."+c.Name); p != "" {
				return p
			}
		}
	case ast.ListValue:
		for i, c := range v.Children {
			if p := valueUsage(c.Value, variable, path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	}
	return ""
}
