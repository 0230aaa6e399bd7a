package app

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
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
}

// newDashboard builds the dashboard over the store and the service and,
// outside production, makes sure the development user exists and prints
// its credentials.
func newDashboard(ctx context.Context, cfg config, store *postgres.Store, svc *voucher.Service, logger *slog.Logger, stdout io.Writer) (dashboard, error) {
	accounts := voucher.NewAccounts(store, voucher.AccountsConfig{})
	backoffice := voucher.NewBackoffice(svc, store)
	if !cfg.Production {
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
		fmt.Fprintf(stdout, "development dashboard user (%s): %s, password %q; sign in at /admin (never made with APP_ENV=production)\n", note, devUserEmail, devUserPassword)
	}
	deps := web.Deps{Accounts: accounts, Vouchers: backoffice, Reservations: svc, Drift: backoffice}
	// Dead-lettered events are shown only once a store counts them.
	if dl, ok := any(store).(web.DeadLetterCounter); ok {
		deps.DeadLetters = dl
	}
	return dashboard{
		handler:    web.New(deps, web.Config{SecureCookies: cfg.Production, Logger: logger}),
		backoffice: backoffice,
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

// userCommand runs `voucherd user add -email E [-name N] -role R
// [-password-stdin]` (the password is the first line of standard input) or
// `voucherd user unlock` (userUnlock).
func userCommand(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer) error {
	const usage = "usage: voucherd user add -email EMAIL [-name NAME] -role marketer|operator|admin [-password-stdin] < password\n" +
		"       voucherd user unlock [-email EMAIL] [-address IP]"
	if len(args) > 0 && args[0] == "unlock" {
		return userUnlock(ctx, cfg, logger, args[1:], stdout, usage)
	}
	if len(args) == 0 || args[0] != "add" {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet("user add", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	email := fs.String("email", "", "the user's email, their sign-in name")
	name := fs.String("name", "", "the user's name, for people")
	role := fs.String("role", "", "marketer, operator or admin")
	_ = fs.Bool("password-stdin", true, "read the password from standard input (always so: never from a flag)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%w\n%s", err, usage)
	}
	if *email == "" || *role == "" {
		return errors.New(usage)
	}
	line, err := bufio.NewReader(Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the password from standard input: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")

	pool, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	accounts := voucher.NewAccounts(postgres.New(pool), voucher.AccountsConfig{})
	u, err := accounts.AddUser(ctx, voucher.NewUser{Email: *email, Name: *name, Role: voucher.Role(*role), Password: password})
	if err != nil {
		if e := voucher.AsError(err); voucher.IsRefusal(err) {
			return errors.New(e.Message)
		}
		return err
	}
	fmt.Fprintf(stdout, "user %s added with role %s\n", u.Email, u.Role)
	return nil
}

// userUnlock is `voucherd user unlock [-email E] [-address IP]`: an admin
// lifting the sign-in lock of an email (too many failed passwords for it)
// or of a client address (too many from it), before the 15 minutes pass.
func userUnlock(ctx context.Context, cfg config, logger *slog.Logger, args []string, stdout io.Writer, usage string) error {
	fs := flag.NewFlagSet("user unlock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	email := fs.String("email", "", "the email whose failed sign-ins stop counting")
	address := fs.String("address", "", "the client IP address whose failed sign-ins stop counting")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w\n%s", err, usage)
	}
	if *email == "" && *address == "" {
		return errors.New(usage)
	}
	pool, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	n, err := voucher.NewAccounts(postgres.New(pool), voucher.AccountsConfig{}).LiftLocks(ctx, *email, *address)
	if err != nil {
		if e := voucher.AsError(err); voucher.IsRefusal(err) {
			return errors.New(e.Message)
		}
		return err
	}
	fmt.Fprintf(stdout, "sign-in lock lifted: %d failed attempt(s) of %s no longer count\n", n, strings.TrimSpace(strings.Join([]string{*email, *address}, " ")))
	return nil
}
