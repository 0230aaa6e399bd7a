package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// rawHTTP is the default load client: a minimal HTTP/1.1 keep-alive client,
// one connection per worker, each request written with one write and its
// answer parsed in place by the worker goroutine itself. net/http's
// Transport hands every request to two goroutines per connection (readLoop,
// writeLoop) and allocates per request; on 2 cores shared with the server
// that client costs more CPU than the ceiling's handler (-client nethttp
// measures with it instead). It speaks only what these servers answer:
// Content-Length or chunked bodies, keep-alive, Connection: close.
type rawConn struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	wbuf []byte
}

// rawAttempt returns an attempt that POSTs build(j) to base+path on the
// worker's own connection, dialled before the clock starts.
func rawAttempt(base, path, token string, build func(dst []byte, j int64) []byte, classify func(status int, body []byte) (string, bool)) func() (attempt, func()) {
	return rawAttemptPaths(base, path, nil, token, build, classify)
}

// rawAttemptPaths is rawAttempt with, when pathOf is set, a path of each
// order's own (a campaign's sale names a code per order).
func rawAttemptPaths(base, path string, pathOf func(j int64) string, token string, build func(dst []byte, j int64) []byte, classify func(status int, body []byte) (string, bool)) func() (attempt, func()) {
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	rest := " HTTP/1.1\r\nHost: " + u.Host + "\r\nUser-Agent: flashbench\r\nContent-Type: application/json\r\n"
	if token != "" {
		rest += "Authorization: Bearer " + token + "\r\n"
	}
	rest += "Content-Length: "
	fixed := "POST " + path + rest
	return func() (attempt, func()) {
		c := &rawConn{addr: u.Host}
		_ = c.dial()
		var body, answer []byte
		return func(j int64) (string, bool, error) {
			body = build(body[:0], j)
			head := fixed
			if pathOf != nil {
				head = "POST " + pathOf(j) + rest
			}
			status, out, err := c.roundTrip(head, body, answer[:0])
			answer = out
			if err != nil {
				return "TRANSPORT_ERROR", false, err
			}
			outcome, ok := classify(status, answer)
			return outcome, ok, nil
		}, c.close
	}
}

func (c *rawConn) dial() error {
	conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
	if err != nil {
		return err
	}
	c.conn = conn
	if c.br == nil {
		c.br = bufio.NewReaderSize(conn, 8<<10)
	} else {
		c.br.Reset(conn)
	}
	return nil
}

func (c *rawConn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

var errMalformed = errors.New("malformed HTTP answer")

// roundTrip sends one request and reads its answer into dst. A connection
// that fails is closed and dialled again by the next request; the request is
// not resent (the answer counts as a transport error).
func (c *rawConn) roundTrip(head string, body, dst []byte) (int, []byte, error) {
	if c.conn == nil {
		if err := c.dial(); err != nil {
			return 0, dst, err
		}
	}
	c.wbuf = append(c.wbuf[:0], head...)
	c.wbuf = strconv.AppendInt(c.wbuf, int64(len(body)), 10)
	c.wbuf = append(c.wbuf, "\r\n\r\n"...)
	c.wbuf = append(c.wbuf, body...)
	_ = c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.conn.Write(c.wbuf); err != nil {
		c.close()
		return 0, dst, err
	}
	status, out, keep, err := c.readAnswer(dst)
	if err != nil || !keep {
		c.close()
	}
	return status, out, err
}

func (c *rawConn) readAnswer(dst []byte) (status int, out []byte, keep bool, err error) {
	line, err := c.br.ReadSlice('\n')
	if err != nil {
		return 0, dst, false, err
	}
	// "HTTP/1.1 201 Created\r\n"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return 0, dst, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, dst, false, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	keep = line[7] == '1' // HTTP/1.1 keeps the connection unless told otherwise
	length, chunked := -1, false
	for {
		line, err = c.br.ReadSlice('\n')
		if err != nil {
			return status, dst, false, err
		}
		if len(line) <= 2 { // the empty line
			break
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 {
			return status, dst, false, fmt.Errorf("%w: header %q", errMalformed, line)
		}
		name, value := line[:colon], bytes.TrimSpace(line[colon+1:])
		switch {
		case asciiEqualFold(name, "content-length"):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return status, dst, false, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
		case asciiEqualFold(name, "transfer-encoding"):
			chunked = asciiEqualFold(value, "chunked")
		case asciiEqualFold(name, "connection"):
			if asciiEqualFold(value, "close") {
				keep = false
			}
		}
	}
	switch {
	case chunked:
		dst, err = c.readChunked(dst)
	case length >= 0:
		dst, err = readN(c.br, dst, length)
	default:
		dst, err = readAll(dst, c.br)
		keep = false
	}
	return status, dst, keep && err == nil, err
}

func (c *rawConn) readChunked(dst []byte) ([]byte, error) {
	for {
		line, err := c.br.ReadSlice('\n')
		if err != nil {
			return dst, err
		}
		size := bytes.TrimSpace(line)
		if i := bytes.IndexByte(size, ';'); i >= 0 {
			size = size[:i]
		}
		n, err := strconv.ParseInt(string(size), 16, 64)
		if err != nil {
			return dst, fmt.Errorf("%w: chunk size %q", errMalformed, line)
		}
		if n == 0 {
			for { // trailers, then the empty line
				line, err := c.br.ReadSlice('\n')
				if err != nil || len(line) <= 2 {
					return dst, err
				}
			}
		}
		if dst, err = readN(c.br, dst, int(n)); err != nil {
			return dst, err
		}
		if _, err := c.br.Discard(2); err != nil {
			return dst, err
		}
	}
}

func readN(r io.Reader, dst []byte, n int) ([]byte, error) {
	start := len(dst)
	if cap(dst)-start < n {
		dst = append(dst[:cap(dst)], make([]byte, start+n-cap(dst))...)
	}
	dst = dst[:start+n]
	_, err := io.ReadFull(r, dst[start:])
	return dst, err
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x := b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != s[i] {
			return false
		}
	}
	return true
}
