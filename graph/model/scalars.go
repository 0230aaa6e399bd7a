// Package model holds the GraphQL models (generated) and the contract's scalars.
package model

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"voucherd/internal/voucher"
)

// The scalars read their input strictly and refuse, as INVALID_INPUT naming
// the input field (its path below the operation's field, such as
// input.totalLimit), whatever is not of their type: a number is never
// wrapped, clamped or rounded, and a malformed time is the caller's error,
// not an internal one. They take the context for the field's path.

// MarshalMoney writes an amount in minor units as a JSON integer, never a
// float or a string.
func MarshalMoney(v int64) graphql.ContextMarshaler {
	return graphql.ContextWriterFunc(func(_ context.Context, w io.Writer) error {
		_, err := io.WriteString(w, strconv.FormatInt(v, 10))
		return err
	})
}

// UnmarshalMoney accepts only a JSON integer of at most voucher.MaxMoney
// (2^53 - 1) either side of zero, the amounts every JSON client holds
// exactly (the service checks each amount's own range, its sign included).
func UnmarshalMoney(ctx context.Context, v any) (int64, error) {
	n, ok := integer(v, 64)
	if !ok || n > voucher.MaxMoney || n < -voucher.MaxMoney {
		field := fieldOf(ctx)
		return 0, voucher.Invalid(field, field+" must be an integer amount of minor units (cents) of at most "+strconv.FormatInt(voucher.MaxMoney, 10)+" (2^53 - 1)")
	}
	return n, nil
}

// MarshalInt writes GraphQL's Int.
func MarshalInt(v int) graphql.ContextMarshaler {
	return graphql.ContextWriterFunc(func(_ context.Context, w io.Writer) error {
		_, err := io.WriteString(w, strconv.Itoa(v))
		return err
	})
}

// UnmarshalInt accepts GraphQL's Int: a signed 32-bit integer, as the
// GraphQL specification defines it (gqlgen's own Int takes 64 bits, and
// the database's int4 columns would then wrap what it took).
func UnmarshalInt(ctx context.Context, v any) (int, error) {
	n, ok := integer(v, 32)
	if !ok {
		field := fieldOf(ctx)
		return 0, voucher.Invalid(field, field+" must be an integer from -2147483648 to 2147483647")
	}
	return int(n), nil
}

// MarshalTime writes an RFC 3339 time.
func MarshalTime(t time.Time) graphql.ContextMarshaler {
	return graphql.ContextWriterFunc(func(ctx context.Context, w io.Writer) error {
		graphql.MarshalTime(t).MarshalGQL(w)
		return nil
	})
}

// UnmarshalTime accepts an RFC 3339 timestamp with a zone (Z or an offset),
// such as 2026-12-01T10:00:00Z.
func UnmarshalTime(ctx context.Context, v any) (time.Time, error) {
	if s, ok := v.(string); ok {
		// time.Parse also takes a comma before the fraction, which RFC 3339
		// does not; the layout checks the rest (a zone is required).
		if t, err := time.Parse(time.RFC3339, s); err == nil && !strings.Contains(s, ",") {
			return t, nil
		}
	}
	field := fieldOf(ctx)
	return time.Time{}, voucher.Invalid(field, field+" must be an RFC 3339 time with a zone, such as 2026-12-01T10:00:00Z")
}

// integer reads an integer of the given bits from what gqlgen hands a
// scalar: int64 from the operation's text, json.Number from variables.
// Floats, exponents, strings and anything out of range are refused.
func integer(v any, bits int) (int64, bool) {
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case int:
		n = int64(v)
	case json.Number:
		var err error
		if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if bits == 32 && (n < math.MinInt32 || n > math.MaxInt32) {
		return 0, false
	}
	return n, true
}

// fieldOf names the input field being read as the path below the
// operation's field: input.totalLimit, or first.
func fieldOf(ctx context.Context) string {
	p := graphql.GetPath(ctx)
	if len(p) > 1 {
		p = p[1:]
	}
	var b strings.Builder
	for _, e := range p {
		switch e := e.(type) {
		case ast.PathName:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(string(e))
		case ast.PathIndex:
			b.WriteString("[" + strconv.Itoa(int(e)) + "]")
		}
	}
	if b.Len() == 0 {
		return "input"
	}
	return b.String()
}
