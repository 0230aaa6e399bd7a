package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"voucherd/internal/gate"
	"voucherd/internal/postgres"
	"voucherd/internal/rediskeys"
	"voucherd/internal/voucher"
)

// keyOpts are the flags of the key subcommands.
type keyOpts struct {
	name, role, expires, id string
	rate, burst             int
}

// keySub is one `voucherd key` subcommand, as userSub is of `user`.
type keySub struct {
	command
	flags   func(fs *flag.FlagSet, o *keyOpts)
	missing func(o keyOpts) string
	run     func(ctx context.Context, keys *voucher.ApiKeys, o keyOpts, stdout io.Writer) error
}

// keySettings are what every key subcommand reads: the database, and Redis
// to tell the servers of a key created or revoked at once.
var keySettings = []string{"DATABASE_URL", "REDIS_URL", "APP_ENV", "LOG_FORMAT", "LOG_LEVEL"}

var keySubs = map[string]keySub{
	"create": {
		command: command{name: "key create", args: "-name NAME -role storefront|admin [-expires TIME] [-rate N [-burst N]]",
			about:    "Creates an API key and prints it once: only its SHA-256 is kept. It is a bearer token on every server at once.",
			settings: keySettings, checkedToo: true},
		flags: func(fs *flag.FlagSet, o *keyOpts) {
			fs.StringVar(&o.name, "name", "", "what the key is for, for people (under 200 characters)")
			fs.StringVar(&o.role, "role", "", "storefront or admin")
			fs.StringVar(&o.expires, "expires", "", "when the key stops working: an RFC 3339 time or a duration from now such as 720h (default never)")
			fs.IntVar(&o.rate, "rate", 0, "requests a second over every server (default no limit)")
			fs.IntVar(&o.burst, "burst", 0, "requests at once above the rate (default the rate)")
		},
		missing: func(o keyOpts) string {
			if o.name == "" || o.role == "" {
				return "-name and -role are required"
			}
			return ""
		},
		run: keyCreate,
	},
	"list": {
		command: command{name: "key list", about: "Lists the API keys, newest first, revoked ones included: prefix, name, role, created, last used, expiry, rate.",
			settings: keySettings, checkedToo: true},
		run: keyList,
	},
	"revoke": {
		command: command{name: "key revoke", args: "-id ID", about: "Revokes an API key: every server refuses it within a second.",
			settings: keySettings, checkedToo: true},
		flags: func(fs *flag.FlagSet, o *keyOpts) { fs.StringVar(&o.id, "id", "", "the key's id (voucherd key list)") },
		missing: func(o keyOpts) string {
			if o.id == "" {
				return "-id is required"
			}
			return ""
		},
		run: keyRevoke,
	},
}

// keyUsage is `voucherd key`'s usage: its subcommands.
const keyUsage = "usage: voucherd key create -name NAME -role storefront|admin [-expires TIME] [-rate N [-burst N]]\n" +
	"       voucherd key list\n" +
	"       voucherd key revoke -id ID\n" +
	"\nManages the API keys in DATABASE_URL, as an admin named after the operating-system user\n" +
	"(the audit log says who). `voucherd key COMMAND -h` tells more of each.\n"

// keyCommand runs `voucherd key SUBCOMMAND` (keyUsage); the command line is
// checked before anything is opened, as userCommand's.
func keyCommand(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer) error {
	usage := keyUsage + settingsUsage(keySettings)
	if len(args) == 0 {
		return &UsageError{reason: "key: which key command?", usage: usage}
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return errHelp
	}
	sub, ok := keySubs[args[0]]
	if !ok {
		return &UsageError{reason: fmt.Sprintf("key: unknown command %q", args[0]), usage: usage}
	}
	var o keyOpts
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
	logger := newLogger(cfg, stderr)
	pool, err := openMigrated(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer pool.Close()
	var changes voucher.KeyChanges
	if rdb, err := gate.NewClient(cfg.RedisURL); err == nil {
		defer func() { _ = rdb.Close() }()
		changes = noisyChanges{rediskeys.NewChanges(rdb), stderr}
	} else {
		fmt.Fprintf(stderr, "REDIS_URL: %v: the servers learn of the change within API_KEY_TTL\n", err)
	}
	keys := voucher.NewApiKeys(postgres.New(pool), changes)
	err = sub.run(voucher.WithCaller(ctx, cliCaller()), keys, o, stdout)
	if e := voucher.AsError(err); err != nil && voucher.IsRefusal(err) {
		if e.Field != "" {
			return fmt.Errorf("%s (%s)", e.Message, e.Field)
		}
		return errors.New(e.Message)
	}
	return err
}

// noisyChanges says on stderr when the servers could not be told at once.
type noisyChanges struct {
	voucher.KeyChanges
	stderr io.Writer
}

func (n noisyChanges) Publish(ctx context.Context) error {
	err := n.KeyChanges.Publish(ctx)
	if err != nil {
		fmt.Fprintf(n.stderr, "could not tell the servers through Redis (%v): they learn of the change within API_KEY_TTL\n", err)
	}
	return err
}

// keyCreate is `voucherd key create`: the key is printed once.
func keyCreate(ctx context.Context, keys *voucher.ApiKeys, o keyOpts, stdout io.Writer) error {
	n := voucher.NewApiKey{Name: o.name, Role: voucher.Role(strings.ToLower(o.role))}
	if o.expires != "" {
		t, err := parseExpiry(o.expires, time.Now())
		if err != nil {
			return err
		}
		n.ExpiresAt = &t
	}
	if o.rate != 0 {
		n.RatePerSecond = &o.rate
	}
	if o.burst != 0 {
		n.Burst = &o.burst
	}
	created, err := keys.Create(ctx, n)
	if err != nil {
		return err
	}
	k := created.Key
	fmt.Fprintf(stdout, "API key %d (%s, %s) created; it is shown this once, only its hash is kept:\n%s\n", k.ID, printable(k.Name), k.Role, created.Secret)
	return nil
}

// parseExpiry reads -expires: an RFC 3339 time or a duration from now.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d), nil
	}
	return time.Time{}, voucher.Invalid("expiresAt", "-expires must be an RFC 3339 time such as 2030-01-02T15:04:05Z or a duration such as 720h")
}

// keyList is `voucherd key list`.
func keyList(ctx context.Context, keys *voucher.ApiKeys, _ keyOpts, stdout io.Writer) error {
	list, err := keys.List(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tNAME\tROLE\tCREATED\tLAST USED\tEXPIRES\tREVOKED\tRATE")
	for _, k := range list {
		rate := "-"
		if k.RatePerSecond != nil {
			rate = strconv.Itoa(*k.RatePerSecond) + "/s"
			if k.Burst != nil {
				rate += " burst " + strconv.Itoa(*k.Burst)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Prefix, printable(k.Name), k.Role,
			stampOf(&k.CreatedAt), stampOf(k.LastUsedAt), stampOf(k.ExpiresAt), stampOf(k.RevokedAt), rate)
	}
	return tw.Flush()
}

func stampOf(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// keyRevoke is `voucherd key revoke -id ID`.
func keyRevoke(ctx context.Context, keys *voucher.ApiKeys, o keyOpts, stdout io.Writer) error {
	k, err := keys.Revoke(ctx, o.id)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "API key %d (%s, %s) revoked at %s: every server refuses it within a second\n", k.ID, k.Prefix, printable(k.Name), stampOf(k.RevokedAt))
	return nil
}
