package graph

import (
	"strings"

	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/validator/core"
	"github.com/vektah/gqlparser/v2/validator/rules"
)

// MaxErrors bounds the validation errors of one response: a document within
// the limits can still break one rule hundreds of times (every pair of 300
// fields with one alias and different arguments), and each error beyond the
// first few tells the client nothing new.
const MaxErrors = 20

// validationRules returns, for each validation, gqlparser's default rules
// with their errors counted: past MaxErrors the rest are dropped unbuilt
// (a dropped error costs no message and no suggestions) and one last error
// says so. With hideSuggestions (production) each message loses its
// "Did you mean ...?" hints, which spell out the schema to a caller who
// cannot introspect it, and a literal of the wrong type is not quoted.
func validationRules(hideSuggestions bool) func() *rules.Rules {
	return func() *rules.Rules {
		defaults := rules.NewDefaultRules()
		out := rules.NewRules()
		count := 0
		for name, rule := range defaults.GetInner() {
			out.AddRule(name, func(observers *core.Events, addError core.AddErrFunc) {
				rule(observers, func(options ...core.ErrorOption) {
					count++
					switch {
					case count <= MaxErrors:
						if hideSuggestions {
							options = append(options, stripSuggestions)
						}
						if hideSuggestions && name == rules.ValuesOfCorrectTypeRule.Name {
							options = append(options, withoutValue)
						}
						addError(options...)
					case count == MaxErrors+1:
						addError(core.Message("more than %d validation errors; the rest are not shown", MaxErrors))
					}
				})
			})
		}
		return out
	}
}

// withoutValue replaces the message of a literal of the wrong type, which
// quotes the literal ("Value \"percent\" does not exist in ..."): in
// production no error quotes a value of the request. The location says
// which literal it is.
func withoutValue(err *gqlerror.Error) {
	err.Message = "a value in the document is not of the type its argument or input field takes"
}

// stripSuggestions cuts an error message at its first "Did you mean": every
// rule of gqlparser appends its suggestions last.
func stripSuggestions(err *gqlerror.Error) {
	if i := strings.Index(err.Message, " Did you mean"); i >= 0 {
		err.Message = err.Message[:i]
	}
}
