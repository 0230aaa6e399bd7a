// Package model holds the GraphQL models (generated) and the contract's scalars.
package model

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/99designs/gqlgen/graphql"

	"voucherd/internal/voucher"
)

// MarshalMoney writes an amount in minor units as a JSON integer, never a
// float or a string.
func MarshalMoney(v int64) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, strconv.FormatInt(v, 10))
	})
}

// UnmarshalMoney accepts only a JSON integer that fits in 64 bits.
func UnmarshalMoney(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, moneyError()
		}
		return n, nil
	}
	return 0, moneyError()
}

func moneyError() error {
	return &voucher.Error{Code: voucher.InvalidInput, Message: fmt.Sprintf("an amount must be a 64-bit integer of minor units (cents)")}
}
