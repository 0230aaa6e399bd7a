package app

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"voucherd/internal/accounts"
	"voucherd/internal/postgres"
	"voucherd/internal/voucher"
)

// userOpts are the flags of the user subcommands.
type userOpts struct {
	email, name, role, address, baseURL string
}

// userSub is one `voucherd user` subcommand: its usage, its flags, what it
// needs of them, and what it does as an admin over the accounts.
type userSub struct {
	command
	flags func(fs *flag.FlagSet, o *userOpts)
	// missing says what a command line lacks ("" when nothing).
	missing func(o userOpts) string
	run     func(ctx context.Context, cfg config, a *accounts.Accounts, o userOpts, stdout io.Writer) error
}

// userSettings are what every user subcommand reads.
var userSettings = []string{"DATABASE_URL", "APP_ENV", "LOG_FORMAT", "LOG_LEVEL"}

func needEmail(o userOpts) string {
	if o.email == "" {
		return "-email is required"
	}
	return ""
}

func needEmailAndRole(o userOpts) string {
	if o.email == "" || o.role == "" {
		return "-email and -role are required"
	}
	return ""
}

func emailFlag(what string) func(fs *flag.FlagSet, o *userOpts) {
	return func(fs *flag.FlagSet, o *userOpts) { fs.StringVar(&o.email, "email", "", what) }
}

// userSubs are the user subcommands by name.
var userSubs = map[string]userSub{
	"add": {
		command: command{name: "user add", args: "-email EMAIL [-name NAME] -role marketer|operator|admin [-password-stdin] < password",
			about: "Creates a dashboard user; the password is the first line of standard input (never a flag).", settings: userSettings, checkedToo: true},
		flags: func(fs *flag.FlagSet, o *userOpts) {
			fs.StringVar(&o.email, "email", "", "the user's email, their sign-in name")
			fs.StringVar(&o.name, "name", "", "the user's name, for people")
			fs.StringVar(&o.role, "role", "", "marketer, operator or admin")
			_ = fs.Bool("password-stdin", true, "read the password from standard input (always so: never from a flag)")
		},
		missing: needEmailAndRole,
		run:     userAdd,
	},
	"list": {
		command: command{name: "user list", about: "Lists every dashboard user with role, status and when they were added.", settings: userSettings, checkedToo: true},
		run:     userList,
	},
	"role": {
		command: command{name: "user role", args: "-email EMAIL -role marketer|operator|admin", about: "Changes a user's role.", settings: userSettings, checkedToo: true},
		flags: func(fs *flag.FlagSet, o *userOpts) {
			fs.StringVar(&o.email, "email", "", "the user whose role changes")
			fs.StringVar(&o.role, "role", "", "marketer, operator or admin")
		},
		missing: needEmailAndRole,
		run:     userRole,
	},
	"disable": {
		command: command{name: "user disable", args: "-email EMAIL", about: "Disables a user: their sessions end and sign-in is refused.", settings: userSettings, checkedToo: true},
		flags:   emailFlag("the user to disable"),
		missing: needEmail,
		run:     userDisable,
	},
	"enable": {
		command: command{name: "user enable", args: "-email EMAIL", about: "Enables a disabled user again.", settings: userSettings, checkedToo: true},
		flags:   emailFlag("the user to enable"),
		missing: needEmail,
		run:     userEnable,
	},
	"reset": {
		command: command{name: "user reset", args: "-email EMAIL [-base-url URL]", about: "Prints a one-time link to set a user's password, for an admin to pass on.",
			settings: append(append([]string{}, userSettings...), "HTTP_ADDR"), checkedToo: true},
		flags: func(fs *flag.FlagSet, o *userOpts) {
			fs.StringVar(&o.email, "email", "", "the user whose password is reset")
			fs.StringVar(&o.baseURL, "base-url", "", "where the dashboard is reached, for the printed link (default: from HTTP_ADDR)")
		},
		missing: needEmail,
		run:     userReset,
	},
	"unlock": {
		command: command{name: "user unlock", args: "[-email EMAIL] [-address IP]",
			about: "Lifts the sign-in lock of an email or of a client address (an IPv6 address lifts its /64) before its 15 minutes pass.", settings: userSettings, checkedToo: true},
		flags: func(fs *flag.FlagSet, o *userOpts) {
			fs.StringVar(&o.email, "email", "", "the email whose failed sign-ins stop counting")
			fs.StringVar(&o.address, "address", "", "the client IP address whose failed sign-ins stop counting")
		},
		missing: func(o userOpts) string {
			if o.email == "" && o.address == "" {
				return "-email or -address is required"
			}
			return ""
		},
		run: userUnlock,
	},
}

// userUsage is `voucherd user`'s usage: its subcommands.
const userUsage = "usage: voucherd user add -email EMAIL [-name NAME] -role marketer|operator|admin [-password-stdin] < password\n" +
	"       voucherd user list\n" +
	"       voucherd user role -email EMAIL -role marketer|operator|admin\n" +
	"       voucherd user disable -email EMAIL\n" +
	"       voucherd user enable -email EMAIL\n" +
	"       voucherd user reset -email EMAIL [-base-url URL]\n" +
	"       voucherd user unlock [-email EMAIL] [-address IP]\n" +
	"\nManages the dashboard's users in DATABASE_URL, as an admin named after the operating-system user\n" +
	"(the audit log says who). `voucherd user COMMAND -h` tells more of each.\n"

// userCommand runs `voucherd user SUBCOMMAND` (userUsage). The command line
// is checked before the settings are read or the database opened: a typo
// costs nothing.
func userCommand(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer) error {
	usage := userUsage + settingsUsage(userSettings)
	if len(args) == 0 {
		return &UsageError{reason: "user: which user command?", usage: usage}
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return errHelp
	}
	sub, ok := userSubs[args[0]]
	if !ok {
		return &UsageError{reason: fmt.Sprintf("user: unknown command %q", args[0]), usage: usage}
	}
	var o userOpts
	define := func(fs *flag.FlagSet) {
		if sub.flags != nil {
			sub.flags(fs, &o)
		}
	}
	if _, err := sub.parse(args[1:], define, 0, stdout); err != nil {
		return err
	}
	if sub.missing != nil {
		if why := sub.missing(o); why != "" {
			return sub.refuse(sub.flagSet(define), why)
		}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	pool, err := openMigrated(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return err
	}
	defer pool.Close()
	accts := accounts.New(postgres.New(pool), accountsConfig(cfg))
	err = sub.run(voucher.WithCaller(ctx, cliCaller()), cfg, accts, o, stdout)
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

// Stdin is where `voucherd user add` reads the password (its first line).
// A variable so a test can give one.
var Stdin io.Reader = os.Stdin

// userAdd is `voucherd user add`: the password is the first line of
// standard input.
func userAdd(ctx context.Context, _ config, a *accounts.Accounts, o userOpts, stdout io.Writer) error {
	line, err := bufio.NewReader(Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the password from standard input: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	u, err := a.AddUser(ctx, accounts.NewUser{Email: o.email, Name: o.name, Role: voucher.Role(o.role), Password: password})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %s added with role %s\n", u.Email, u.Role)
	return nil
}

// userList is `voucherd user list`: every user with role and status.
func userList(ctx context.Context, _ config, a *accounts.Accounts, _ userOpts, stdout io.Writer) error {
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EMAIL\tNAME\tROLE\tSTATUS\tADDED")
	// Every user, page after page (the dashboard shows one at a time).
	for q := (accounts.UserQuery{Page: 1}); ; q.Page++ {
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
func userRole(ctx context.Context, _ config, a *accounts.Accounts, o userOpts, stdout io.Writer) error {
	before, err := a.ChangeRole(ctx, o.email, voucher.Role(o.role))
	if err != nil {
		return err
	}
	if before == voucher.Role(o.role) {
		fmt.Fprintf(stdout, "user %s has role %s already: nothing changed\n", strings.ToLower(o.email), o.role)
		return nil
	}
	fmt.Fprintf(stdout, "user %s: role %s -> %s\n", strings.ToLower(o.email), before, o.role)
	return nil
}

// userDisable is `voucherd user disable -email E`.
func userDisable(ctx context.Context, _ config, a *accounts.Accounts, o userOpts, stdout io.Writer) error {
	u, err := a.DisableUser(ctx, o.email)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %s disabled: their sessions have ended and sign-in is refused\n", u.Email)
	return nil
}

// userEnable is `voucherd user enable -email E`.
func userEnable(ctx context.Context, _ config, a *accounts.Accounts, o userOpts, stdout io.Writer) error {
	u, err := a.EnableUser(ctx, o.email)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "user %s enabled: they can sign in again with their password\n", u.Email)
	return nil
}

// userReset is `voucherd user reset -email E [-base-url URL]`: it prints a
// one-time link to set a new password, for the admin to pass on.
func userReset(ctx context.Context, cfg config, a *accounts.Accounts, o userOpts, stdout io.Writer) error {
	base := o.baseURL
	if base == "" {
		base = dashboardBase(cfg.HTTPAddr)
	}
	link, err := a.ResetPassword(ctx, o.email)
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
func userUnlock(ctx context.Context, _ config, a *accounts.Accounts, o userOpts, stdout io.Writer) error {
	n, err := a.LiftLocks(ctx, o.email, o.address)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sign-in lock lifted: %d failed attempt(s) of %s no longer count\n", n, strings.TrimSpace(strings.Join([]string{o.email, o.address}, " ")))
	return nil
}
