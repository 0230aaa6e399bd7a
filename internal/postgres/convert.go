package postgres

import (
	"fmt"
	"math"

	"voucherd/internal/voucher"
)

// Checked narrowing for the database's 32-bit columns and parameters: a
// value that does not fit is refused, never wrapped (int32(4294967396) is
// 100).

// limit32 is a LIMIT (or batch size) for a 32-bit query parameter. Limits
// come from the code (page sizes, batch sizes, sweep sizes), and asking for
// more than MaxInt32 rows asks for no fewer than MaxInt32, so capping
// changes no answer where a wrap would make it negative.
func limit32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	if n < 0 {
		return 0
	}
	return int32(n)
}

// count32 narrows a count (uses, remaining, drift) that the domain bounds
// by voucher.MaxLimit; one out of range is refused as INVALID_INPUT naming
// the field, so a caller that skipped validation still writes nothing wrong.
func count32(field string, n int) (int32, error) {
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, voucher.Invalid(field, fmt.Sprintf("%s must be at most %d", field, voucher.MaxLimit))
	}
	return int32(n), nil
}

// limits32 narrows a voucher's totalLimit and perUserLimit.
func limits32(n voucher.NewVoucher) (total, perUser int32, err error) {
	if total, err = count32("totalLimit", n.TotalLimit); err != nil {
		return 0, 0, err
	}
	if perUser, err = count32("perUserLimit", n.PerUserLimit); err != nil {
		return 0, 0, err
	}
	return total, perUser, nil
}
