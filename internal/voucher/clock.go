package voucher

import (
	"sync/atomic"
	"time"
)

// clockOffset shifts this process's own clock where it decides something by
// it (CLOCK_OFFSET, for tests of clock skew between instances; the server
// refuses it with APP_ENV=production). It applies to the eligibility window
// checked by the sync flash path and checkVoucher, the times of the events
// the kafka path publishes, whether a gate has outlived its voucher, which
// gates warm-up loads, and the back office's "has it started". The
// database's clock (ordinary vouchers, the expiry sweep's SQL) and Redis's
// are not shifted: the kafka path's confirm, release and expiry are
// decided at the gate on Redis's clock (confirm.lua, mark_released.lua),
// the one their expiresAt was set on.
var clockOffset atomic.Int64

// SetClockOffset shifts clockNow by d, for the whole process.
func SetClockOffset(d time.Duration) { clockOffset.Store(int64(d)) }

// clockNow is this process's clock, shifted by CLOCK_OFFSET.
func clockNow() time.Time { return time.Now().Add(time.Duration(clockOffset.Load())) }
