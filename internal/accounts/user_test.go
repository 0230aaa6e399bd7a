package accounts

import (
	"testing"

	"voucherd/internal/voucher"
)

func TestNewUser_Validate(t *testing.T) {
	t.Parallel()
	good := NewUser{Email: " Mia@Example.com ", Role: voucher.RoleMarketer, Password: "long enough!"}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good user: %v", err)
	}
	for _, tc := range []struct {
		desc   string
		change func(*NewUser)
		field  string
	}{
		{"no email", func(u *NewUser) { u.Email = "" }, "email"},
		{"not an address", func(u *NewUser) { u.Email = "Mia <mia@example.com>" }, "email"},
		{"storefront is no dashboard role", func(u *NewUser) { u.Role = voucher.RoleStorefront }, "role"},
		{"short password", func(u *NewUser) { u.Password = "short" }, "password"},
		{"password past bcrypt's 72 bytes", func(u *NewUser) { u.Password = string(make([]byte, 73)) }, "password"},
	} {
		u := good
		tc.change(&u)
		if err := u.Validate(); voucher.AsError(err).Field != tc.field {
			t.Errorf("%s: %v, want INVALID_INPUT on %s", tc.desc, err, tc.field)
		}
	}
}
