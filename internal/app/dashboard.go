package app

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"voucherd/internal/job"
	"voucherd/internal/postgres"
	"voucherd/internal/voucher"
	"voucherd/web"
)

// The development dashboard user that serve creates outside production.
const (
	devUserEmail    = "dev@localhost"
	devUserPassword = "dev-password"
)

// sampleInterval is how often the counters of open vouchers are sampled for
// the dashboard's chart of remaining uses.
const sampleInterval = 5 * time.Second

// Stdin is where `voucherd user add` reads the password (its first line).
// A variable so a test can give one.
var Stdin io.Reader = os.Stdin

// dashboard is the /admin handler with what it runs on.
type dashboard struct {
	handler    http.Handler
	backoffice *voucher.Backoffice
	sampler    *job.Periodic
	// session reads a dashboard session for routes outside /admin.
	session func(r *http.Request) (voucher.Caller, bool, error)
}

// devAccountAllowed says whether the development user may exist and sign
// in: outside production, on a server that listens on loopback only (its
// password is in this file). Elsewhere it is barred from signing in, also
// when an earlier development run against the same database left it there.
func devAccountAllowed(cfg config) bool {
	host, _, err := net.SplitHostPort(cfg.HTTPAddr)
	return !cfg.Production && err == nil && isLoopback(host)
}

// accountsConfig is the sign-in settings of the dashboard's accounts.
func accountsConfig(cfg config) voucher.AccountsConfig {
	var ac voucher.AccountsConfig
	if !devAccountAllowed(cfg) {
		ac.Barred = []string{devUserEmail}
	}
	return ac
}

// newDashboard builds the dashboard over the store and the service and,
// outside production on a loopback address, makes sure the development user
// exists and prints its credentials.
func newDashboard(ctx context.Context, cfg config, store *postgres.Store, svc *voucher.Service, logger *slog.Logger, stdout io.Writer) (dashboard, error) {
	accounts := voucher.NewAccounts(store, accountsConfig(cfg))
	backoffice := voucher.NewBackoffice(svc, store)
	if !cfg.Production && !devAccountAllowed(cfg) {
		fmt.Fprintf(stdout, "no development dashboard user: HTTP_ADDR %s is not loopback only (%s cannot sign in here)\n", cfg.HTTPAddr, devUserEmail)
	}
	if devAccountAllowed(cfg) {
		created, err := accounts.EnsureUser(ctx, voucher.NewUser{
			Email: devUserEmail, Name: "Development admin", Role: voucher.RoleAdmin, Password: devUserPassword,
		})
		if err != nil {
			return dashboard{}, fmt.Errorf("development dashboard user: %w", err)
		}
		note := "exists"
		if created {
			note = "created"
		}
		fmt.Fprintf(stdout, "development dashboard user (%s): %s, password %q; sign in at /admin (never made, and refused, with APP_ENV=production or off loopback)\n", note, devUserEmail, devUserPassword)
	}
	deps := web.Deps{Accounts: accounts, Vouchers: backoffice, Reservations: svc, Drift: backoffice, DeadLetterDesk: backoffice, Campaigns: backoffice}
	// Dead-lettered events are shown only once a store counts them.
	if dl, ok := any(store).(web.DeadLetterCounter); ok {
		deps.DeadLetters = dl
	}
	return dashboard{
		handler:    web.New(deps, web.Config{SecureCookies: cfg.Production, Logger: logger, DefaultCurrency: cfg.DefaultCurrency, ClientAddresses: cfg.TrustedProxies}),
		backoffice: backoffice,
		session:    web.SessionCaller(accounts),
		sampler: &job.Periodic{
			Name:     "sample-counters",
			Interval: sampleInterval,
			Logger:   logger,
			RunOnce: func(ctx context.Context) error {
				_, err := backoffice.SampleOpenVouchers(ctx)
				return err
			},
		},
	}, nil
}

// userUsage lists the user subcommands.
const userUsage = "usage: voucherd user add -email EMAIL [-name NAME] -role marketer|operator|admin [-password-stdin] < password\n" +
	"       voucherd user list\n" +
	"       voucherd user role -email EMAIL -role marketer|operator|admin\n" +
	"       voucherd user disable -email EMAIL\n" +
	"       voucherd user enable -email EMAIL\n" +
	"       voucherd user reset -email EMAIL [-base-url URL]\n" +
	"       voucherd user unlock [-email EMAIL] [-address IP]"

// userCommand runs `voucherd user SUBCOMMAND` (userUsage). Each runs as an
// admin named after the operating-system user, so the audit log says who
// changed what from the command line too.
func userCommand(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(userUsage)
	}
	run, ok := map[string]func(context.Context, *voucher.Accounts, []string, io.Writer) error{
		"add":     userAdd,
		"list":    userList,
		"role":    userRole,
		"disable": userDisable,
		"enable":  userEnable,
		"reset": func(ctx context.Context, a *voucher.Accounts, args []string, out io.Writer) error {
			return userReset(ctx, cfg, a, args, out)
		},
		"unlock": userUnlock,
	}[args[0]]
	if !ok {
		return errors.New(userUsage)
	}
	// The flags are checked before the database is opened: a typo costs
	// nothing.
	if err := run(ctx, nil, args[1:], io.Discard); err != nil {
		return err
	}
	pool, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	accounts := voucher.NewAccounts(postgres.New(pool), accountsConfig(cfg))
	err = run(voucher.WithCaller(ctx, cliCaller()), accounts, args[1:], stdout)
	if e := voucher.AsError(err); err != nil && voucher.IsRefusal(err) {
		return errors.New(e.Message)
	}
	return err
}

// cliCaller is who a user subcommand acts as: an admin (whoever can reach
// the database is one), named after the operating-system user.
func cliCaller() voucher.Caller {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return voucher.Caller{Role: voucher.RoleAdmin, Name: "cli:" + name}
}

// userFlags parses a subcommand's flags; with a nil accounts the caller
// only checks them.
func userFlags(name string, args []string, define func(fs *flag.FlagSet)) error {
	fs := flag.NewFlagSet("user "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs)
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w\n%s", err, userUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected %q\n%s", fs.Arg(0), userUsage)
	}
	return nil
}

// userAdd is `voucherd user add -email E [-name N] -role R
// [-password-stdin]`: the password is the first line of standard input.
func userAdd(ctx context.Context, a *voucher.Accounts, args []string, stdout io.Writer) error {
	var email, name, role string
	if err := userFlags("add", args, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the user's email, their sign-in name")
		fs.StringVar(&name, "name", "", "the user's name, for people")
		fs.StringVar(&role, "role", "", "marketer, operator or admin")
		_ = fs.Bool("password-stdin", true, "read the password from standard input (always so: never from a flag)")
	}); err != nil {
		return err
	}
	if email == "" || role == "" {
		return errors.New(userUsage)
	}
	if a == nil {
		return nil
	}
	line, err := bufio.NewReader(Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the password from standard input: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	u, err := a.AddUser(ctx, voucher.NewUser{Email: email, Name: name, Role: voucher.Role(role), Password: password})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %s added with role %s\n", u.Email, u.Role)
	return nil
}

// userList is `voucherd user list`: every user with role and status.
func userList(ctx context.Context, a *voucher.Accounts, args []string, stdout io.Writer) error {
	if err := userFlags("list", args, func(*flag.FlagSet) {}); err != nil {
		return err
	}
	if a == nil {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EMAIL\tNAME\tROLE\tSTATUS\tADDED")
	// Every user, page after page (the dashboard shows one at a time).
	for q := (voucher.UserQuery{Page: 1}); ; q.Page++ {
		page, err := a.Users(ctx, q)
		if err != nil {
			return err
		}
		for _, u := range page.Users {
			status := "active"
			if u.Disabled() {
				status = "disabled " + u.DisabledAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", u.Email, printable(u.Name), u.Role, status, u.CreatedAt.UTC().Format(time.RFC3339))
		}
		if !page.More {
			break
		}
	}
	return tw.Flush()
}

// printable keeps a name from moving the terminal's cursor: a name is text,
// but tabs and the like would break the columns.
func printable(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// userRole is `voucherd user role -email E -role R`.
func userRole(ctx context.Context, a *voucher.Accounts, args []string, stdout io.Writer) error {
	var email, role string
	if err := userFlags("role", args, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the user whose role changes")
		fs.StringVar(&role, "role", "", "marketer, operator or admin")
	}); err != nil {
		return err
	}
	if email == "" || role == "" {
		return errors.New(userUsage)
	}
	if a == nil {
		return nil
	}
	before, err := a.ChangeRole(ctx, email, voucher.Role(role))
	if err != nil {
		return err
	}
	if before == voucher.Role(role) {
		fmt.Fprintf(stdout, "user %s has role %s already: nothing changed\n", strings.ToLower(email), role)
		return nil
	}
	fmt.Fprintf(stdout, "user %s: role %s -> %s\n", strings.ToLower(email), before, role)
	return nil
}

// userDisable is `voucherd user disable -email E`.
func userDisable(ctx context.Context, a *voucher.Accounts, args []string, stdout io.Writer) error {
	var email string
	if err := userFlags("disable", args, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the user to disable")
	}); err != nil {
		return err
	}
	if email == "" {
		return errors.New(userUsage)
	}
	if a == nil {
		return nil
	}
	u, err := a.DisableUser(ctx, email)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %s disabled: their sessions have ended and sign-in is refused\n", u.Email)
	return nil
}

// userReset is `voucherd user reset -email E [-base-url URL]`: it prints a
// one-time link to set a new password, for the admin to pass on.
func userReset(ctx context.Context, cfg config, a *voucher.Accounts, args []string, stdout io.Writer) error {
	var email, base string
	if err := userFlags("reset", args, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the user whose password is reset")
		fs.StringVar(&base, "base-url", dashboardBase(cfg.HTTPAddr), "where the dashboard is reached, for the printed link")
	}); err != nil {
		return err
	}
	if email == "" {
		return errors.New(userUsage)
	}
	if a == nil {
		return nil
	}
	link, err := a.ResetPassword(ctx, email)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "one-time link for %s (works once, until %s; pass it on):\n%s%s\n",
		link.Email, link.ExpiresAt.UTC().Format(time.RFC3339), strings.TrimRight(base, "/"), link.Path())
	return nil
}

// dashboardBase guesses the dashboard's URL from HTTP_ADDR.
func dashboardBase(addr string) string {
	if strings.HasPrefix(addr, ":") {
		addr = "localhost" + addr
	}
	return "http://" + addr
}

// userUnlock is `voucherd user unlock [-email E] [-address IP]`: an admin
// lifting the sign-in lock of an email (too many failed passwords for it)
// or of a client address (too many from it), before the 15 minutes pass.
func userUnlock(ctx context.Context, a *voucher.Accounts, args []string, stdout io.Writer) error {
	var email, address string
	if err := userFlags("unlock", args, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the email whose failed sign-ins stop counting")
		fs.StringVar(&address, "address", "", "the client IP address whose failed sign-ins stop counting")
	}); err != nil {
		return err
	}
	if email == "" && address == "" {
		return errors.New(userUsage)
	}
	if a == nil {
		return nil
	}
	n, err := a.LiftLocks(ctx, email, address)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sign-in lock lifted: %d failed attempt(s) of %s no longer count\n", n, strings.TrimSpace(strings.Join([]string{email, address}, " ")))
	return nil
}

// userEnable is `voucherd user enable -email E`.
func userEnable(ctx context.Context, a *voucher.Accounts, args []string, stdout io.Writer) error {
	var email string
	if err := userFlags("enable", args, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "the user to enable")
	}); err != nil {
		return err
	}
	if email == "" {
		return errors.New(userUsage)
	}
	if a == nil {
		return nil
	}
	u, err := a.EnableUser(ctx, email)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %s enabled: they can sign in again with their password\n", u.Email)
	return nil
}
