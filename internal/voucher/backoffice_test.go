package voucher

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestVoucherState_FollowsTheWindowAndTheCount(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := Voucher{TotalLimit: 5, StartsAt: now.Add(-time.Hour), EndsAt: now.Add(time.Hour)}
	for _, tc := range []struct {
		desc string
		at   time.Time
		used int
		want VoucherState
	}{
		{"before the window", now.Add(-2 * time.Hour), 0, StateScheduled},
		{"in the window", now, 4, StateLive},
		{"in the window, every use taken", now, 5, StateSoldOut},
		{"after the window, sold out", now.Add(2 * time.Hour), 5, StateEnded},
		{"after the window", now.Add(2 * time.Hour), 0, StateEnded},
	} {
		v.UsedCount = tc.used
		if got := v.State(tc.at); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.desc, got, tc.want)
		}
	}
}

// FieldErrors must agree with Validate: no message exactly when Validate
// passes, and Validate's field among the messages when it does not.
func TestFieldErrors_AgreeWithValidate(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ok := NewVoucher{Code: "OK", DiscountAmount: 1, TotalLimit: 1, PerUserLimit: 1, StartsAt: start, EndsAt: start.Add(time.Hour)}
	for _, tc := range []struct {
		desc   string
		change func(*NewVoucher)
		fields []string
	}{
		{"valid", func(*NewVoucher) {}, nil},
		{"bad code", func(n *NewVoucher) { n.Code = "a b" }, []string{"code"}},
		{"no discount", func(n *NewVoucher) { n.DiscountAmount = 0 }, []string{"discountAmount"}},
		{"negative minimum", func(n *NewVoucher) { n.MinOrderAmount = -1 }, []string{"minOrderAmount"}},
		{"no uses", func(n *NewVoucher) { n.TotalLimit, n.PerUserLimit = 0, 0 }, []string{"totalLimit", "perUserLimit"}},
		{"no start", func(n *NewVoucher) { n.StartsAt = time.Time{} }, []string{"startsAt"}},
		{"end before start", func(n *NewVoucher) { n.EndsAt = start }, []string{"endsAt"}},
		{"everything", func(n *NewVoucher) { *n = NewVoucher{} }, []string{"code", "discountAmount", "totalLimit", "perUserLimit", "startsAt", "endsAt"}},
	} {
		n := ok
		tc.change(&n)
		got := n.FieldErrors()
		if len(got) != len(tc.fields) {
			t.Errorf("%s: %v, want messages for %v", tc.desc, got, tc.fields)
		}
		for _, f := range tc.fields {
			if got[f] == "" {
				t.Errorf("%s: no message for %s", tc.desc, f)
			}
		}
		err := n.Validate()
		if (err == nil) != (len(got) == 0) {
			t.Errorf("%s: Validate says %v, FieldErrors %v", tc.desc, err, got)
		}
		if err != nil && got[AsError(err).Field] == "" {
			t.Errorf("%s: Validate's field %q has no message", tc.desc, AsError(err).Field)
		}
	}
}

func TestVoucherChange_KeepsWhatItDoesNotSet(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := Voucher{Code: "A", DiscountAmount: 5, MinOrderAmount: 1, TotalLimit: 10, PerUserLimit: 2, StartsAt: start, EndsAt: start.Add(time.Hour)}
	limit, flash := 20, true
	got := VoucherChange{TotalLimit: &limit, Flash: &flash}.Apply(v)
	want := NewVoucher{Code: "A", DiscountAmount: 5, MinOrderAmount: 1, TotalLimit: 20, PerUserLimit: 2, StartsAt: start, EndsAt: start.Add(time.Hour), Flash: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Apply (-want +got):\n%s", diff)
	}
	if d := describeChange(v, got); d != "totalLimit 10 → 20; flash false → true" {
		t.Errorf("describeChange = %q", d)
	}
}
