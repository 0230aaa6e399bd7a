package server

import (
	"bytes"
	"net/http"
	"strconv"
	"unicode/utf8"

	"voucherd/internal/voucher"
)

// readBody is a request body limitBody has already read: handlers may read
// it as a stream, or take its bytes without a copy while nothing has read
// from it yet (unread).
type readBody struct {
	bytes.Reader
	data []byte
}

func newReadBody(data []byte) *readBody {
	b := &readBody{data: data}
	b.Reset(data)
	return b
}

func (*readBody) Close() error { return nil }

// unread returns the whole body if r's body is a readBody nobody has read from.
func unread(r *http.Request) ([]byte, bool) {
	b, ok := r.Body.(*readBody)
	if !ok || b.Len() != len(b.data) {
		return nil, false
	}
	return b.data, true
}

// parseReserveBody reads the reserve body in one pass for the shape clients
// send: one flat object with exactly the keys customerId, orderId and
// orderAmount (spelled so, once each), customerId as JSON digits or a string
// of digits, orderId a string without escapes, orderAmount a JSON integer,
// nothing but whitespace around. ok is false for anything else (other or
// differently cased keys, duplicates, null, escapes, floats, a syntax error,
// trailing data) and for any value reserveBody.request would refuse: the
// caller then takes the general path (readReserveBody),
// which stays the one definition of every error answer. When ok is true the
// request is the one the general path would have built.
func parseReserveBody(data []byte, code string) (req voucher.ReserveRequest, ok bool) {
	p := jsonScan{data: data}
	p.space()
	if !p.byte('{') {
		return req, false
	}
	var seen [3]bool
	for {
		p.space()
		key, ok := p.plainString()
		if !ok {
			return req, false
		}
		p.space()
		if !p.byte(':') {
			return req, false
		}
		p.space()
		switch string(key) {
		case "customerId":
			if seen[0] {
				return req, false
			}
			seen[0] = true
			var digits []byte
			if p.peek() == '"' {
				if digits, ok = p.plainString(); !ok {
					return req, false
				}
			} else if digits, ok = p.integer(); !ok {
				return req, false
			}
			id, err := voucher.ParseCustomerID(string(digits))
			if err != nil {
				return req, false
			}
			req.CustomerID = id
		case "orderId":
			if seen[1] {
				return req, false
			}
			seen[1] = true
			s, ok := p.plainString()
			if !ok {
				return req, false
			}
			req.OrderID = string(s)
		case "orderAmount":
			if seen[2] {
				return req, false
			}
			seen[2] = true
			digits, ok := p.integer()
			if !ok {
				return req, false
			}
			n, err := strconv.ParseInt(string(digits), 10, 64)
			if err != nil || n > voucher.MaxMoney {
				return req, false
			}
			req.OrderAmount = n
		default:
			return req, false
		}
		p.space()
		if p.byte(',') {
			continue
		}
		if !p.byte('}') {
			return req, false
		}
		break
	}
	p.space()
	if p.i != len(p.data) || !seen[0] || !seen[1] || !seen[2] {
		return req, false
	}
	req.Code = code
	return req, true
}

// jsonScan is the cursor of parseReserveBody.
type jsonScan struct {
	data []byte
	i    int
}

func (p *jsonScan) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScan) peek() byte {
	if p.i < len(p.data) {
		return p.data[p.i]
	}
	return 0
}

func (p *jsonScan) byte(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

// plainString reads a JSON string with no escape and no control character,
// in valid UTF-8: exactly the strings whose decoded value is their bytes.
func (p *jsonScan) plainString() ([]byte, bool) {
	if !p.byte('"') {
		return nil, false
	}
	start := p.i
	for ; p.i < len(p.data); p.i++ {
		switch c := p.data[p.i]; {
		case c == '"':
			s := p.data[start:p.i]
			p.i++
			return s, utf8.Valid(s)
		case c < 0x20 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// integer reads a JSON number that is an integer: 0 or -?[1-9][0-9]*, not
// followed by a fraction or an exponent.
func (p *jsonScan) integer() ([]byte, bool) {
	start := p.i
	minus := p.byte('-')
	switch c := p.peek(); {
	case c == '0' && !minus: // -0 is refused by the general path
		p.i++
	case c >= '1' && c <= '9':
		for p.i++; p.peek() >= '0' && p.peek() <= '9'; p.i++ {
		}
	default:
		return nil, false
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return nil, false
	}
	return p.data[start:p.i], true
}
