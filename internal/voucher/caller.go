package voucher

import "context"

// Role is what a caller may do: storefront and admin come with bearer
// tokens; marketer, operator and admin are dashboard users.
type Role string

// The roles.
const (
	RoleStorefront Role = "storefront"
	RoleAdmin      Role = "admin"
	RoleMarketer   Role = "marketer"
	RoleOperator   Role = "operator"
)

// Valid reports whether r is one of the roles.
func (r Role) Valid() bool {
	switch r {
	case RoleStorefront, RoleAdmin, RoleMarketer, RoleOperator:
		return true
	}
	return false
}

// Operation names a group of service calls that one set of roles may make.
type Operation string

// The operations.
const (
	OpCheckout      Operation = "checkout"       // reserve, confirm, release
	OpRead          Operation = "read"           // voucher, vouchers, reservation
	OpManageVoucher Operation = "manage-voucher" // create and change vouchers
	OpOperate       Operation = "operate"        // drift, reconciliation, gate rebuild
	OpManageUsers   Operation = "manage-users"   // dashboard users and their sign-in locks
	// OpReadCampaigns reads campaigns (their codes' export is OpManageVoucher).
	OpReadCampaigns Operation = "read-campaigns"
	OpManageKeys    Operation = "manage-keys" // API keys: create, list, revoke
	// OpReadSale reads a voucher's sale as it happened (the dashboard's
	// voucher page, voucher.sale): every role but the storefront's.
	OpReadSale Operation = "read-sale"
	// OpManageWebhooks: webhook endpoints, their secrets and deliveries.
	OpManageWebhooks Operation = "manage-webhooks"
)

var permissions = map[Operation][]Role{
	OpCheckout:       {RoleStorefront, RoleAdmin},
	OpRead:           {RoleStorefront, RoleAdmin, RoleMarketer, RoleOperator},
	OpManageVoucher:  {RoleAdmin, RoleMarketer},
	OpOperate:        {RoleAdmin, RoleOperator},
	OpManageUsers:    {RoleAdmin},
	OpReadCampaigns:  {RoleAdmin, RoleMarketer, RoleOperator},
	OpManageKeys:     {RoleAdmin},
	OpReadSale:       {RoleAdmin, RoleMarketer, RoleOperator},
	OpManageWebhooks: {RoleAdmin},
}

// Caller is who makes a request; transports put it in the context after
// authenticating.
type Caller struct {
	Role Role
	Name string // the dashboard user, or "token" for a bearer token
}

// Can reports whether the caller may perform op.
func (c Caller) Can(op Operation) bool {
	for _, r := range permissions[op] {
		if r == c.Role {
			return true
		}
	}
	return false
}

type callerKey struct{}

// WithCaller returns a context carrying the caller.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller in ctx; ok is false for the service's own
// jobs, which carry none.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// Actor names who acts, for an audit record: the context's caller, or the
// service itself (jobs, subcommands) when there is none.
func Actor(ctx context.Context) (name string, role Role) {
	if c, ok := CallerFrom(ctx); ok {
		return c.Name, c.Role
	}
	return "voucherd", "service"
}

// Authorize is authorize for the services outside this package that share
// its roles and operations (package accounts: OpManageUsers).
func Authorize(ctx context.Context, op Operation) error { return authorize(ctx, op) }

// authorize returns FORBIDDEN when the context's caller may not perform op.
// A context without a caller is the service itself (jobs, subcommands).
func authorize(ctx context.Context, op Operation) error {
	c, ok := CallerFrom(ctx)
	if !ok || c.Can(op) {
		return nil
	}
	return Errorf(Forbidden, "role %s may not %s", c.Role, op)
}
