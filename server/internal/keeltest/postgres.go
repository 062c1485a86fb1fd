package keeltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/keelrun/keel/server/devserver"
)

// EnvPostgres names the environment variable with the URL of a PostgreSQL
// server for tests, postgres://USER:PASSWORD@HOST:PORT/?sslmode=disable;
// the user needs CREATEDB. `make test-postgres` sets it (.ci/run starts
// Debian's PostgreSQL for it). Tests that need PostgreSQL skip without it.
const EnvPostgres = "KEEL_POSTGRES_DSN"

// Postgres returns the settings of two fresh databases on the server named
// by KEEL_POSTGRES_DSN, for devserver.Config.Postgres: the server creates
// them at start, and they are dropped when tb ends (after servers started
// later in tb stopped). It skips tb without KEEL_POSTGRES_DSN.
func Postgres(tb testing.TB) *devserver.Postgres {
	tb.Helper()
	dsn := os.Getenv(EnvPostgres)
	if dsn == "" {
		tb.Skipf("needs PostgreSQL: set %s (make test-postgres does)", EnvPostgres)
	}
	pg, err := devserver.ParsePostgresURL(dsn)
	if err != nil {
		tb.Fatalf("%s: %v", EnvPostgres, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	pg.Database = "keel_test_" + hex.EncodeToString(b[:])
	pg.VisibilityDatabase = pg.Database + "_visibility"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := PostgresConn(ctx, "postgres")
		if err != nil {
			tb.Errorf("drop test databases: %v", err)
			return
		}
		defer conn.Close(ctx)
		for _, db := range []string{pg.Database, pg.VisibilityDatabase} {
			// FORCE cannot end an autovacuum worker that PostgreSQL started
			// on the new database (SQLSTATE 42501, "must be a member of the
			// role whose process is being terminated"); it ends on its own
			// within moments, and nothing tells when: ask again.
			var err error
			for range 50 {
				if _, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err == nil ||
					!strings.Contains(err.Error(), "42501") {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				tb.Errorf("drop test database %s: %v", db, err)
			}
		}
	})
	return pg
}

// PostgresConn connects to database on the server named by
// KEEL_POSTGRES_DSN, for tests that look into the server's tables.
func PostgresConn(ctx context.Context, database string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(os.Getenv(EnvPostgres))
	if err != nil {
		return nil, err
	}
	cfg.Database = database
	return pgx.ConnectConfig(ctx, cfg)
}
