package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"

	"voucherd/internal/voucher"
)

// Bodies are read as they are documented, and refused rather than
// reinterpreted: encoding/json matches keys in any case, lets the last of
// two equal keys win, skips unknown ones and replaces invalid UTF-8 and
// unpaired surrogate escapes with U+FFFD (so "u8-\xff" and "u8-\xfe" would
// be one orderId). Each of those is INVALID_INPUT here, checked on the raw
// bytes before the decoder sees them.

// isJSON reports whether a Content-Type is application/json, with at most a
// charset parameter of UTF-8 (JSON's only encoding).
func isJSON(contentType string) bool {
	if contentType == "application/json" { // what clients send: no parsing
		return true
	}
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil || mediaType != "application/json" {
		return false
	}
	for name, value := range params {
		if name != "charset" || !strings.EqualFold(value, "utf-8") {
			return false
		}
	}
	return true
}

func unsupportedMediaType(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "UNSUPPORTED_MEDIA_TYPE", "message": "the body must be JSON, sent as Content-Type: application/json"})
}

// badText returns the offset of the first thing in a JSON text that a
// decoder would replace with U+FFFD: a byte sequence that is not UTF-8, or
// an escaped unpaired surrogate; -1 when there is none. (An escaped NUL is
// decoded as it is, and the domain refuses it with the field's own rule.)
// Text without a backslash needs only utf8.Valid.
func badText(data []byte) int {
	if bytes.IndexByte(data, '\\') < 0 {
		if utf8.Valid(data) {
			return -1
		}
	}
	inString := false
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && n == 1 {
				return i
			}
			i += n
			continue
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(data):
			if data[i+1] != 'u' {
				i += 2
				continue
			}
			r, ok := hex4(data[i+2:])
			switch {
			case !ok:
				i += 2 // a syntax error: the decoder words it
				continue
			case r >= 0xD800 && r < 0xDC00:
				if lo, ok := hex4(data[min(i+8, len(data)):]); !ok || !bytes.HasPrefix(data[i+6:], []byte(`\u`)) || lo < 0xDC00 || lo > 0xDFFF {
					return i
				}
				i += 12
				continue
			case r >= 0xDC00 && r <= 0xDFFF:
				return i
			}
			i += 6
			continue
		}
		i++
	}
	return -1
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// keyPath returns the object keys that lead to byte off of a JSON text,
// outermost first (none at the top level or inside a key), to name the
// field of a refusal. It runs on refusals only.
func keyPath(data []byte, off int) []string {
	type level struct {
		object, wantKey bool
		key             string
	}
	var stack []level
	for i := 0; i < off && i < len(data); {
		switch data[i] {
		case '{':
			stack = append(stack, level{object: true, wantKey: true})
		case '[':
			stack = append(stack, level{})
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].wantKey = true
			}
		case '"':
			end := i + 1
			for end < len(data) && data[end] != '"' {
				if data[end] == '\\' {
					end++
				}
				end++
			}
			if end >= off {
				i = off // off is inside this string
				continue
			}
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
				stack[n-1].key, stack[n-1].wantKey = string(data[i+1:end]), false
			}
			i = end
		}
		i++
	}
	var keys []string
	for _, l := range stack {
		if l.object && !l.wantKey {
			keys = append(keys, l.key)
		}
	}
	return keys
}

// textError is the refusal of text that is not valid UTF-8, naming field.
func textError(field string) error {
	return voucher.Invalid(field, field+" must be valid UTF-8 text, without an unpaired surrogate escape")
}

// fieldName is a key as a refusal's field: itself when it is a short plain
// name, else "body", so an answer never echoes a long or odd piece of the
// body.
func fieldName(key string) string {
	if len(key) == 0 || len(key) > 64 {
		return "body"
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return "body"
		}
	}
	return key
}

// member is one documented member of a JSON object body, read raw so its
// parser tells a missing value from a zero one.
type member struct {
	name string
	dst  *json.RawMessage
}

// decodeObject reads a body that must be one JSON object whose keys are
// among fields, spelled exactly so, each at most once. Every refusal is
// INVALID_INPUT naming the field (or "body") in words of its own: no piece
// of the body and no Go type is ever repeated.
func decodeObject(data []byte, fields ...member) error {
	if off := badText(data); off >= 0 {
		keys := keyPath(data, off)
		if len(keys) == 0 {
			return textError("body")
		}
		return textError(fieldName(keys[0]))
	}
	notObject := voucher.Invalid("body", "the body must be one JSON object")
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return notObject
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return notObject
		}
		var dst *json.RawMessage
		for _, f := range fields {
			if key == f.name {
				dst = f.dst
			} else if dst == nil && strings.EqualFold(key, f.name) {
				return voucher.Invalid(f.name, f.name+" must be spelled "+f.name+": field names are case-sensitive")
			}
		}
		if dst == nil {
			return voucher.Invalid(fieldName(key), "the body has a field that is not documented; the fields are "+names(fields))
		}
		if len(*dst) > 0 {
			return voucher.Invalid(key, key+" is given twice")
		}
		if err := dec.Decode(dst); err != nil {
			return voucher.Invalid(key, key+" is not a JSON value this field takes")
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return notObject
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return notObject
	}
	return nil
}

func names(fields []member) string {
	s := make([]string, len(fields))
	for i, f := range fields {
		s[i] = f.name
	}
	return strings.Join(s, ", ")
}

// refuseReplacedText guards the GraphQL endpoint, whose decoders (the JSON
// of the request, then gqlparser for the operation's own string literals)
// would replace invalid UTF-8 and unpaired surrogates with U+FFFD: such a
// request is refused whole with a GraphQL error, INVALID_INPUT naming the
// variable's path (or query), before anything runs.
func refuseReplacedText(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := unread(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if field, bad := graphQLBadText(data); bad {
			msg := field + " must be valid UTF-8 text, without an unpaired surrogate escape"
			writeJSON(w, http.StatusBadRequest, map[string]any{
				"data":   nil,
				"errors": []map[string]any{{"message": msg, "extensions": map[string]string{"code": string(voucher.InvalidInput), "field": field}}},
			})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// graphQLBadText checks a GraphQL request body: its JSON text, then the
// escapes in the operation's string literals (decoded only when the
// operation can hold a backslash at all, which needs one escaped in JSON).
func graphQLBadText(data []byte) (field string, bad bool) {
	if off := badText(data); off >= 0 {
		keys := keyPath(data, off)
		switch {
		case len(keys) > 1 && keys[0] == "variables":
			return fieldName(strings.Join(keys[1:], ".")), true
		case len(keys) > 0 && keys[0] == "query":
			return "query", true
		}
		return "body", true
	}
	if !bytes.Contains(data, []byte(`\\`)) && !bytes.Contains(data, []byte(`\u005c`)) && !bytes.Contains(data, []byte(`\u005C`)) {
		return "", false
	}
	var req struct {
		Query string `json:"query"`
	}
	if json.Unmarshal(data, &req) != nil || !strings.Contains(req.Query, `\`) {
		return "", false // a malformed request: gqlgen answers it
	}
	if badGraphQLEscape(req.Query) {
		return "query", true
	}
	return "", false
}

// badGraphQLEscape reports whether a string literal of a GraphQL document
// escapes an unpaired surrogate (\uD800), which gqlparser turns into U+FFFD
// (a braced \u{D800} is already its syntax error). Block strings have no
// escapes.
func badGraphQLEscape(query string) bool {
	runes := []rune(query) // token positions count runes
	lex := lexer.New(&ast.Source{Input: query})
	for {
		tok, err := lex.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return false
		}
		if tok.Kind != lexer.String || tok.Pos.End > len(runes) {
			continue
		}
		if badText([]byte(string(runes[tok.Pos.Start:tok.Pos.End]))) >= 0 {
			return true
		}
	}
}
