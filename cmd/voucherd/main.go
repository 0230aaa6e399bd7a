// Command voucherd is the voucher service: `voucherd serve` (the default)
// runs it, `voucherd migrate` applies the database migrations, `voucherd user
// add|list|role|disable|enable|reset|unlock` manages dashboard users and
// `voucherd broker` runs a development Kafka-protocol broker that outlives a
// crash of serve (`voucherd help`; every command answers -h).
//
// Exit status: 0 done (or a usage asked for with -h), 2 a command line it
// cannot run (the usage is printed), 1 anything else.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"voucherd/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "voucherd:", err)
	}
	os.Exit(app.ExitCode(err))
}
