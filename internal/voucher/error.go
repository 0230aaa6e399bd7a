package voucher

import (
	"errors"
	"fmt"
	"time"
)

// ErrorCode is one of the contract's error codes (VoucherErrorCode), plus the
// transport-level FORBIDDEN and INTERNAL.
type ErrorCode string

// The contract's codes. Every refusal the service returns carries one.
const (
	OutOfStock ErrorCode = "OUT_OF_STOCK"
	// BudgetExhausted: the voucher's budgetAmount cannot cover the order's
	// discount (checked after OUT_OF_STOCK).
	BudgetExhausted     ErrorCode = "BUDGET_EXHAUSTED"
	AlreadyUsed         ErrorCode = "ALREADY_USED"
	NotEligible         ErrorCode = "NOT_ELIGIBLE"
	NotFound            ErrorCode = "NOT_FOUND"
	OrderConflict       ErrorCode = "ORDER_CONFLICT"
	ReservationReleased ErrorCode = "RESERVATION_RELEASED"
	AlreadyConfirmed    ErrorCode = "ALREADY_CONFIRMED"
	// NotConfirmed: a rollback of a reservation still RESERVED (release it
	// instead).
	NotConfirmed ErrorCode = "NOT_CONFIRMED"
	// PeriodLimitReached: a period limit of the voucher holds its max in
	// the current period (checked after ALREADY_USED, before OUT_OF_STOCK);
	// Error.AvailableAt says when the period ends.
	PeriodLimitReached ErrorCode = "PERIOD_LIMIT_REACHED"
	VoucherExists      ErrorCode = "VOUCHER_EXISTS"
	InvalidInput       ErrorCode = "INVALID_INPUT"
	Unavailable        ErrorCode = "UNAVAILABLE"
	// Forbidden is a caller without the role for an operation; it is a
	// GraphQL error (extensions.code), not a payload error.
	Forbidden ErrorCode = "FORBIDDEN"
	// Internal is anything unexpected: logged with its cause, shown generically.
	Internal ErrorCode = "INTERNAL"
)

// Error is the service's one error type: a code for programs, a sentence for
// people and, for INVALID_INPUT, the input field at fault.
type Error struct {
	Code    ErrorCode
	Message string
	Field   string
	// AvailableAt is, for PERIOD_LIMIT_REACHED, when the period ends and a
	// use may be taken again; zero otherwise.
	AvailableAt time.Time
	// Cause is what went wrong underneath (UNAVAILABLE): logged, never shown.
	Cause error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: %s", e.Code, e.Message)
	if e.Field != "" {
		msg += " (" + e.Field + ")"
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// ErrCodeUsedUp is the cause of an OUT_OF_STOCK for a campaign code with
// no use left (its campaign may have some): the flash path tells it apart
// from a campaign sold out to converge its gate (Gate.DropCode).
var ErrCodeUsedUp = errors.New("the campaign code is used up")

// CodeUsedUp is OUT_OF_STOCK for a campaign code with no use left.
func CodeUsedUp(code string) error {
	return &Error{Code: OutOfStock, Message: fmt.Sprintf("code %s is used up", code), Cause: ErrCodeUsedUp}
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an INVALID_INPUT error naming the field as the schema spells it.
func Invalid(field, message string) *Error {
	return &Error{Code: InvalidInput, Message: message, Field: field}
}

// ErrorCodeOf returns the code of err, or Internal for anything that is not an *Error.
func ErrorCodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	if e, ok := err.(*Error); ok { // the service's own errors come unwrapped: no errors.As allocation
		return e.Code
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// AsError returns err as an *Error; anything unexpected becomes a generic
// INTERNAL error whose message reveals nothing of the cause.
func AsError(err error) *Error {
	if e, ok := err.(*Error); ok { // as in ErrorCodeOf
		return e
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Message: "internal error"}
}

// IsRefusal reports whether err is one of the contract's codes, answered to
// the caller as data, rather than a fault. UNAVAILABLE is one, but it is no
// definite "no": the outcome of a write that timed out is unknown.
func IsRefusal(err error) bool {
	switch ErrorCodeOf(err) {
	case "", Internal, Forbidden:
		return false
	}
	return true
}

// publicMessages are the messages of refusals as answers carry them with
// APP_ENV=production, where no answer quotes a value of the request: the
// service's own messages name the orderId, the code, the customer or the
// amount, which helps in development and in logs.
var publicMessages = map[ErrorCode]string{
	OutOfStock:          "every use of the voucher is held or confirmed",
	BudgetExhausted:     "the voucher's budget cannot cover this discount",
	AlreadyUsed:         "the customer already holds every use of the voucher allowed to one customer",
	NotEligible:         "the voucher does not apply: outside its validity window, below its minimum order amount, in another currency, for other customer segments or for none of the items",
	NotFound:            "not found",
	OrderConflict:       "the orderId was already used with another voucher, customer or amount",
	ReservationReleased: "the reservation was released or expired",
	AlreadyConfirmed:    "the reservation is confirmed",
	NotConfirmed:        "the reservation is not confirmed; release it instead",
	PeriodLimitReached:  "a period limit of the voucher is reached; see availableAt",
	VoucherExists:       "a voucher or campaign code with that code exists",
	Unavailable:         "the service cannot answer now; retry with the same orderId",
	Forbidden:           "the credential may not do this",
	Internal:            "internal error",
	VoucherStarted:      "the voucher has started; it can only be ended now",
	VoucherNotLive:      "the voucher has ended",
}

// PublicMessage is e's message as an API answer carries it: in production
// a fixed sentence per code, but for INVALID_INPUT, whose messages name the
// field and its rule and never its value.
func (e *Error) PublicMessage(production bool) string {
	if !production || e.Code == InvalidInput {
		return e.Message
	}
	if m, ok := publicMessages[e.Code]; ok {
		return m
	}
	return string(e.Code)
}
