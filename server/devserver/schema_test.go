package devserver

import (
	"testing"

	serverschema "go.temporal.io/server/schema"
	pgschema "go.temporal.io/server/schema/postgresql/v12"
)

// TestSchemaSteps reads the server module's embedded PostgreSQL schema
// steps: in version order (1.10 after 1.9), each with statements, ending
// at the version the server requires.
func TestSchemaSteps(t *testing.T) {
	for dir, want := range map[string]string{
		postgresSchema:           pgschema.Version,
		postgresVisibilitySchema: pgschema.VisibilityVersion,
	} {
		steps, err := schemaSteps(serverschema.Assets(), dir+"/versioned")
		if err != nil {
			t.Fatal(err)
		}
		if len(steps) < 10 {
			t.Fatalf("%s: %d steps", dir, len(steps))
		}
		for i, s := range steps {
			if i > 0 && compareSchemaVersions(steps[i-1].version, s.version) >= 0 {
				t.Errorf("%s: step %s after %s", dir, s.CurrVersion, steps[i-1].CurrVersion)
			}
		}
		if last := steps[len(steps)-1].CurrVersion; last != want {
			t.Errorf("%s: last step %s, the server needs %s", dir, last, want)
		}
	}
}
