package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"voucherd/internal/voucher"
)

// TestMapError_ConnectionFailuresAreUnavailable: every way a connection can
// fail under a request is UNAVAILABLE (retry), never an internal error; a
// fault in the request stays one.
func TestMapError_ConnectionFailuresAreUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		err  error
		want voucher.ErrorCode
	}{
		{"connection ended mid-reply", fmt.Errorf("commit: %w", io.ErrUnexpectedEOF), voucher.Unavailable},
		{"connection ended", io.EOF, voucher.Unavailable},
		{"pgx closed the connection", fmt.Errorf("query: %w", pgconn.ErrConnClosed), voucher.Unavailable},
		{"reset by peer", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, voucher.Unavailable},
		{"broken pipe", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, voucher.Unavailable},
		{"caller gone", fmt.Errorf("begin: %w", context.Canceled), voucher.Unavailable},
		{"deadline", context.DeadlineExceeded, voucher.Unavailable},
		{"connection exception", &pgconn.PgError{Code: "08006"}, voucher.Unavailable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, voucher.Unavailable},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, voucher.Unavailable},
		{"starting up", &pgconn.PgError{Code: "57P03"}, voucher.Unavailable},
		{"too many connections", &pgconn.PgError{Code: "53300"}, voucher.Unavailable},
		{"statement timeout", &pgconn.PgError{Code: "57014"}, voucher.Unavailable},
		{"a bug: undefined column", &pgconn.PgError{Code: "42703"}, voucher.Internal},
		{"a bug: anything else", errors.New("unexpected"), voucher.Internal},
	} {
		if got := voucher.ErrorCodeOf(mapError(tc.err)); got != tc.want {
			t.Errorf("%s: %v mapped to %s, want %s", tc.desc, tc.err, got, tc.want)
		}
	}
}
