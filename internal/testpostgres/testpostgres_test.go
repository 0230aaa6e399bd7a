package testpostgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestServer_StopsAndRestarts(t *testing.T) {
	s := Start(t)
	ctx := context.Background()
	ping := func() error {
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return c.Ping(ctx)
	}
	if err := ping(); err != nil {
		t.Fatalf("a fresh cluster does not answer: %v", err)
	}
	s.Stop()
	if err := ping(); err == nil {
		t.Fatal("a stopped cluster answered")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err != nil {
		t.Fatalf("a restarted cluster does not answer: %v", err)
	}
}
