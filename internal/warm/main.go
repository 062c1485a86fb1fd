// Command warm exists only to pin dependencies in go.mod until the packages
// that use them land. Delete it once every import below is used elsewhere.
package main

import (
	_ "github.com/anthropics/anthropic-sdk-go"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/invopop/jsonschema"
	_ "github.com/nats-io/nats-server/v2/server"
	_ "github.com/nats-io/nats.go"
	_ "github.com/openai/openai-go/v3"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
	_ "github.com/stretchr/testify/require"
	_ "github.com/temporalio/ui-server/v2/server"
	_ "go.temporal.io/sdk/client"
	_ "go.temporal.io/sdk/testsuite"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	_ "go.temporal.io/server/schema/sqlite"
	_ "go.temporal.io/server/temporal"
	_ "go.uber.org/zap"
)

func main() {}
