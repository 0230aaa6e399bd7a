package graph

import (
	"encoding/json"
	"strconv"
)

// readFastRequest reads a body of the one shape the fast path serves,
// {"query": "...", "operationName": "...", "variables": {"<name>": {<fields>}}}
// in any order, with JSON white space anywhere, each key at most once and
// written without escapes, and the input's fields JSON strings or JSON
// integers. It reports false for anything else, which the general path then
// reads: a false is never wrong, only slower, so it refuses whatever it does
// not read exactly as encoding/json would (strings with escapes or non-ASCII
// bytes are handed to encoding/json itself).
func readFastRequest(body []byte, r *fastRequest) bool {
	if len(body) > smallBody {
		return false
	}
	s := scanner{b: body}
	if !s.next('{') {
		return false
	}
	var haveQuery, haveVars bool
	for {
		key, ok := s.key()
		if !ok || !s.next(':') {
			return false
		}
		switch key {
		case "query":
			if haveQuery {
				return false
			}
			haveQuery = true
			if r.query, ok = s.str(); !ok {
				return false
			}
		case "operationName":
			if r.hasOpName {
				return false
			}
			r.hasOpName = true
			if r.opName, ok = s.str(); !ok {
				return false
			}
		case "variables":
			if haveVars || !s.variables(r) {
				return false
			}
			haveVars = true
		default:
			return false
		}
		if s.next(',') {
			continue
		}
		if s.next('}') {
			break
		}
		return false
	}
	s.space()
	return s.i == len(s.b) && haveQuery && haveVars
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next consumes c after white space.
func (s *scanner) next(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// key reads an object key of plain printable ASCII without escapes.
func (s *scanner) key() (string, bool) {
	if !s.next('"') {
		return "", false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		if c == '"' {
			k := string(s.b[start:s.i])
			s.i++
			return k, true
		}
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return "", false
		}
	}
	return "", false
}

// str reads a JSON string as encoding/json decodes it.
func (s *scanner) str() (string, bool) {
	if !s.next('"') {
		return "", false
	}
	start := s.i
	plain := true
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			if plain {
				return string(s.b[start : s.i-1]), true
			}
			var v string
			if err := json.Unmarshal(s.b[start-1:s.i], &v); err != nil {
				return "", false
			}
			return v, true
		case c == '\\':
			plain = false
			s.i++ // the escaped byte; encoding/json checks the escape
		case c < 0x20:
			return "", false
		case c >= 0x80:
			plain = false // encoding/json replaces invalid UTF-8
		}
	}
	return "", false
}

// integer reads a JSON number that is an integer (no fraction, no
// exponent) and fits in 64 bits.
func (s *scanner) integer() (int64, bool) {
	s.space()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	switch n := s.i - digits; {
	case n == 0, n > 1 && s.b[digits] == '0':
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	return v, err == nil
}

// variables reads {"<name>": {<fields>}}: one variable, an object of at
// most four fields.
func (s *scanner) variables(r *fastRequest) bool {
	if !s.next('{') {
		return false
	}
	name, ok := s.key()
	if !ok || !s.next(':') || !s.next('{') {
		return false
	}
	r.varName = name
	if s.next('}') {
		return s.next('}')
	}
	for {
		if r.n == len(r.inputs) {
			return false
		}
		v := &r.inputs[r.n]
		if v.key, ok = s.key(); !ok || !s.next(':') {
			return false
		}
		switch c := s.peek(); {
		case c == '"':
			v.str, ok = s.str()
		case c == '-' || (c >= '0' && c <= '9'):
			v.num, ok = s.integer()
			v.isNum = true
		default:
			ok = false
		}
		if !ok {
			return false
		}
		r.n++
		if s.next(',') {
			continue
		}
		if s.next('}') {
			return s.next('}')
		}
		return false
	}
}
