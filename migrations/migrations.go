// Package migrations holds the goose migrations, embedded in the binary and
// applied at start and by `voucherd migrate`.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Up applies every pending migration. A Postgres advisory lock makes
// instances starting together migrate one at a time.
func Up(ctx context.Context, db *sql.DB) ([]*goose.MigrationResult, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p.Up(ctx)
}

// Checksum identifies this set of migrations: a SHA-256 of every file's name
// and content. Tests name the migrated database they clone by it, so a
// changed migration gets a template of its own.
func Checksum() string {
	h := sha256.New()
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err) // the embedded directory is always there
	}
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// perDatabase are the migrations whose Up gives a database a random state of
// its own: 00071, where its campaign ids start (they name flash campaigns'
// gates in a Redis that databases may share). A copy of a migrated database
// (the tests clone one template) runs them again (PerDatabaseUp), or it
// would share that state with its original. A migration that does the like
// belongs here.
var perDatabase = []string{"00071_campaign_ids_random_start.sql"}

// PerDatabaseUp is the SQL of perDatabase's Up sections, for a copy of a
// migrated database to run (statements separated by semicolons: PostgreSQL's
// simple protocol runs them in one call).
func PerDatabaseUp() (string, error) {
	var b strings.Builder
	for _, name := range perDatabase {
		src, err := files.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("migrations: %w", err)
		}
		_, up, ok := strings.Cut(string(src), "-- +goose Up\n")
		up, _, _ = strings.Cut(up, "-- +goose Down")
		if !ok || strings.TrimSpace(up) == "" {
			return "", fmt.Errorf("migrations: %s has no Up section", name)
		}
		b.WriteString(up)
	}
	return b.String(), nil
}
