package voucher

import "strconv"

// MaxMoney is the largest amount of money the service takes or keeps, in
// minor units: 2^53 - 1, the largest integer every JSON client (a
// JavaScript number, any double) holds exactly, and so the largest a gate's
// Lua script (whose numbers are doubles) compares exactly. Every Money input
// above it is INVALID_INPUT, and a sum the service keeps (budgetUsed) never
// passes it: with every term at most MaxMoney a sum of two fits int64,
// Postgres's bigint and a double's exact range, so no addition anywhere can
// wrap, fail or round.
const MaxMoney int64 = 1<<53 - 1

// maxMoneyDigits is MaxMoney as the messages say it.
var maxMoneyDigits = strconv.FormatInt(MaxMoney, 10)

// ValidateMoney refuses an amount of field below least or above MaxMoney.
func ValidateMoney(field string, n, least int64) error {
	if msg := moneyRule(field, n, least); msg != "" {
		return Invalid(field, msg)
	}
	return nil
}

// moneyRule is the message for an amount of field outside least..MaxMoney
// (least is 0 or 1); "" when it is inside.
func moneyRule(field string, n, least int64) string {
	switch {
	case n > MaxMoney:
		return field + " must be at most " + maxMoneyDigits + " (2^53 - 1) minor units"
	case n >= least:
		return ""
	case least > 0:
		return field + " must be greater than 0"
	}
	return field + " must be 0 or more"
}

// MoneyRoom is how much more discount a voucher whose reservations hold
// budgetUsed can take before that sum passes MaxMoney (negative for a row
// stored before the bound existed above it: such a voucher takes no more).
// Written as a difference, it cannot overflow for any budgetUsed >= 0.
func MoneyRoom(budgetUsed int64) int64 { return MaxMoney - budgetUsed }

// SumTooLarge is the refusal of a reserve whose discount would take its
// voucher's budgetUsed past MaxMoney: the contract's INVALID_INPUT on
// orderAmount, the input that made the discount (never INTERNAL).
func SumTooLarge() error {
	return Invalid("orderAmount", "orderAmount is too large: its discount would take the voucher's budgetUsed past "+maxMoneyDigits+", the most an amount may be")
}

// BudgetRefusal says whether a discount can be taken by the voucher's sums
// with budgetUsed already held: INVALID_INPUT (orderAmount) when it would
// take budgetUsed past MaxMoney, checked first (the contract puts it before
// the budget), BUDGET_EXHAUSTED when the budget cannot cover it; nil when it
// fits. Every path (database, gate, check) decides in this order.
func (v Voucher) BudgetRefusal(budgetUsed, discount int64) error {
	if discount > MoneyRoom(budgetUsed) {
		return SumTooLarge()
	}
	if !v.BudgetCovers(budgetUsed, discount) {
		return Errorf(BudgetExhausted, "the budget of voucher %s cannot cover a discount of %d", v.Code, discount)
	}
	return nil
}

// SumMoney adds amounts of 0..MaxMoney each; ok is false when one is outside
// that range or the sum passes MaxMoney, so a sum never wraps (a batch of
// writes then goes one by one, each decided alone).
func SumMoney(amounts ...int64) (sum int64, ok bool) {
	for _, a := range amounts {
		if a < 0 || a > MoneyRoom(sum) {
			return 0, false
		}
		sum += a
	}
	return sum, true
}
