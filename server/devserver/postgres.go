package devserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	pgplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
)

// Postgres points the server at PostgreSQL instead of SQLite: executions in
// Database, visibility in VisibilityDatabase, through the server's own
// "postgres12_pgx" plugin. Start creates missing databases (the user needs
// CREATEDB for that, or create them beforehand) and brings both schemas to
// the version this server needs, as Temporal's temporal-sql-tool does
// (setup-schema at 0.0, then update-schema through the versioned steps;
// see schema.go).
type Postgres struct {
	// Address of the PostgreSQL server, host:port. Optional: default
	// 127.0.0.1:5432.
	Address string
	// User and Password to log in with. Required: User.
	User     string
	Password string
	// Database holds executions. Optional: default "temporal".
	Database string
	// VisibilityDatabase holds visibility records. Optional: default
	// Database + "_visibility".
	VisibilityDatabase string
	// ConnectAttributes are connection parameters such as sslmode.
	// Optional.
	ConnectAttributes map[string]string
}

// Defaults of Postgres.
const (
	DefaultPostgresAddress  = "127.0.0.1:5432"
	DefaultPostgresDatabase = "temporal"
)

// ErrPostgresURL reports a PostgreSQL URL that ParsePostgresURL cannot use.
var ErrPostgresURL = errors.New("devserver: bad PostgreSQL URL")

// ParsePostgresURL reads a PostgreSQL connection URL,
// postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=disable: its path
// names Database (VisibilityDatabase is Database + "_visibility") and its
// query parameters become ConnectAttributes.
func ParsePostgresURL(s string) (*Postgres, error) {
	u, err := url.Parse(s)
	if err != nil {
		// url.Error repeats the URL, and with it the password.
		return nil, fmt.Errorf("%w: does not parse", ErrPostgresURL)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("%w: scheme %q, want postgres", ErrPostgresURL, u.Scheme)
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, fmt.Errorf("%w: no user", ErrPostgresURL)
	}
	pg := &Postgres{Address: u.Host, User: u.User.Username(), Database: strings.TrimPrefix(u.Path, "/")}
	pg.Password, _ = u.User.Password()
	if u.Port() == "" && u.Host != "" {
		pg.Address = net.JoinHostPort(u.Hostname(), "5432")
	}
	for k, v := range u.Query() {
		if pg.ConnectAttributes == nil {
			pg.ConnectAttributes = map[string]string{}
		}
		pg.ConnectAttributes[k] = v[len(v)-1]
	}
	return pg.withDefaults()
}

func (pg Postgres) withDefaults() (*Postgres, error) {
	if pg.User == "" {
		return nil, fmt.Errorf("%w: no user", ErrPostgresURL)
	}
	if pg.Address == "" {
		pg.Address = DefaultPostgresAddress
	}
	if _, _, err := net.SplitHostPort(pg.Address); err != nil {
		return nil, fmt.Errorf("devserver: Postgres.Address %q is not host:port", pg.Address)
	}
	if pg.Database == "" {
		pg.Database = DefaultPostgresDatabase
	}
	if pg.VisibilityDatabase == "" {
		pg.VisibilityDatabase = pg.Database + "_visibility"
	}
	if pg.Database == pg.VisibilityDatabase {
		// Both schemas keep their version in a schema_version table.
		return nil, fmt.Errorf("devserver: Postgres needs two databases, got %q twice", pg.Database)
	}
	pg.ConnectAttributes = maps.Clone(pg.ConnectAttributes)
	return &pg, nil
}

// sqlConfig is the server's persistence configuration for one database.
func (pg *Postgres) sqlConfig(database string) *config.SQL {
	return &config.SQL{
		PluginName:        pgplugin.PluginNamePGX,
		DatabaseName:      database,
		ConnectAddr:       pg.Address,
		ConnectProtocol:   "tcp",
		User:              pg.User,
		Password:          pg.Password,
		ConnectAttributes: maps.Clone(pg.ConnectAttributes),
		// The plugin's defaults (2 open, 2 idle) queue every request of a
		// busy shard behind two connections.
		MaxConns:     20,
		MaxIdleConns: 20,
	}
}

// url is the connection URL of database, for pgx.
func (pg *Postgres) url(database string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(pg.User, pg.Password), Host: pg.Address, Path: "/" + database}
	q := url.Values{}
	for k, v := range pg.ConnectAttributes {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// postgresSchemas are the embedded schema directories of server v1.32's
// PostgreSQL plugin, for Database and VisibilityDatabase.
const (
	postgresSchema           = "postgresql/v12/temporal"
	postgresVisibilitySchema = "postgresql/v12/visibility"
)

// setupPostgres creates the databases if missing and brings their schemas
// up to date. It is what a fresh database needs and a no-op on a current
// one.
func setupPostgres(ctx context.Context, pg *Postgres, logger log.Logger) error {
	for _, db := range []struct{ name, schema string }{
		{pg.Database, postgresSchema},
		{pg.VisibilityDatabase, postgresVisibilitySchema},
	} {
		if err := createDatabase(ctx, pg, db.name); err != nil {
			return err
		}
		if err := updateSchema(ctx, pg.sqlConfig(db.name), db.schema, logger); err != nil {
			return fmt.Errorf("devserver: schema of database %q: %w", db.name, err)
		}
	}
	return nil
}

// createDatabase creates database unless it exists, through the
// "postgres" maintenance database.
func createDatabase(ctx context.Context, pg *Postgres, database string) error {
	conn, err := pgx.Connect(ctx, pg.url("postgres"))
	if err != nil {
		return fmt.Errorf("devserver: connect to PostgreSQL at %s: %w", pg.Address, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", database).Scan(&exists)
	if err != nil {
		return fmt.Errorf("devserver: look for database %q: %w", database, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{database}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: created meanwhile
		return nil
	}
	if err != nil {
		return fmt.Errorf("devserver: create database %q: %w", database, err)
	}
	return nil
}
