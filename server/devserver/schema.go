package devserver

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence"
	persistencesql "go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	"go.temporal.io/server/common/resolver"
	serverschema "go.temporal.io/server/schema"
)

// updateSchema brings the schema of one SQL database to the newest version
// embedded in the server module (schemaDir, e.g.
// "postgresql/v12/temporal"), as temporal-sql-tool's setup-schema -v 0.0
// followed by update-schema does: the version tables if missing, then
// every step of schemaDir/versioned above the database's version, in
// order, each recorded in schema_version and schema_update_history. A
// database at the newest version is left alone.
//
// Temporal's tool packages (go.temporal.io/server/tools/...) do the same
// but pull in a CLI framework keel does not otherwise need.
func updateSchema(ctx context.Context, cfg *config.SQL, schemaDir string, logger log.Logger) error {
	steps, err := schemaSteps(serverschema.Assets(), path.Join(schemaDir, "versioned"))
	if err != nil {
		return err
	}
	db, err := persistencesql.NewSQLAdminDB(sqlplugin.DbKindUnknown, cfg, resolver.NewNoopResolver(), logger, metrics.NoopMetricsHandler)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if err := db.CreateSchemaVersionTables(); err != nil {
		return fmt.Errorf("version tables: %w", err)
	}
	current, err := db.ReadSchemaVersion(cfg.DatabaseName)
	if errors.Is(err, sql.ErrNoRows) {
		current, err = "0.0", nil
	}
	if err != nil {
		return fmt.Errorf("read version: %w", err)
	}
	have, err := parseSchemaVersion(current)
	if err != nil {
		return err
	}
	for _, step := range steps {
		if compareSchemaVersions(step.version, have) <= 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, stmt := range step.statements {
			if err := db.Exec(stmt); err != nil {
				return fmt.Errorf("step %s: %w", step.CurrVersion, err)
			}
		}
		if err := db.UpdateSchemaVersion(cfg.DatabaseName, step.CurrVersion, step.MinCompatibleVersion); err != nil {
			return fmt.Errorf("step %s: %w", step.CurrVersion, err)
		}
		if err := db.WriteSchemaUpdateLog(current, step.CurrVersion, "", step.Description); err != nil {
			return fmt.Errorf("step %s: %w", step.CurrVersion, err)
		}
		current = step.CurrVersion
	}
	return nil
}

// schemaStep is one versioned directory: its manifest.json and the
// statements of the files it lists.
type schemaStep struct {
	CurrVersion          string
	MinCompatibleVersion string
	Description          string
	SchemaUpdateCqlFiles []string

	version    []int
	statements []string
}

// schemaSteps reads every step under dir, oldest first.
func schemaSteps(fsys fs.FS, dir string) ([]schemaStep, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("devserver: schema steps: %w", err)
	}
	var steps []schemaStep
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		stepDir := path.Join(dir, e.Name())
		raw, err := fs.ReadFile(fsys, path.Join(stepDir, "manifest.json"))
		if err != nil {
			return nil, fmt.Errorf("devserver: schema step: %w", err)
		}
		var step schemaStep
		if err := json.Unmarshal(raw, &step); err != nil {
			return nil, fmt.Errorf("devserver: schema step %s: %w", stepDir, err)
		}
		if "v"+step.CurrVersion != e.Name() {
			return nil, fmt.Errorf("devserver: schema step %s says version %s", stepDir, step.CurrVersion)
		}
		if step.version, err = parseSchemaVersion(step.CurrVersion); err != nil {
			return nil, err
		}
		var files []io.Reader
		for _, name := range step.SchemaUpdateCqlFiles {
			b, err := fs.ReadFile(fsys, path.Join(stepDir, name))
			if err != nil {
				return nil, fmt.Errorf("devserver: schema step: %w", err)
			}
			files = append(files, bytes.NewReader(b))
		}
		if step.statements, err = persistence.LoadAndSplitQueryFromReaders(files); err != nil {
			return nil, fmt.Errorf("devserver: schema step %s: %w", stepDir, err)
		}
		steps = append(steps, step)
	}
	slices.SortFunc(steps, func(a, b schemaStep) int { return compareSchemaVersions(a.version, b.version) })
	return steps, nil
}

// parseSchemaVersion reads "1.19" as [1 19].
func parseSchemaVersion(s string) ([]int, error) {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("devserver: schema version %q is not MAJOR.MINOR", s)
		}
		v = append(v, n)
	}
	return v, nil
}

func compareSchemaVersions(a, b []int) int { return slices.Compare(a, b) }
