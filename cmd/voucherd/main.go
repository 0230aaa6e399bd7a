// Command voucherd is the voucher service: `voucherd serve` (the default)
// runs it, `voucherd migrate` applies the database migrations, `voucherd user
// add` creates a dashboard user and `voucherd broker` runs a development
// Kafka-protocol broker that outlives a crash of serve (`voucherd help`).
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
	defer stop()
	if err := app.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "voucherd:", err)
		os.Exit(1)
	}
}
