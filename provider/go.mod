module github.com/keelrun/keel/provider

go 1.26.10

require (
	github.com/anthropics/anthropic-sdk-go v1.84.0
	github.com/google/go-cmp v0.7.0
	github.com/keelrun/keel v0.0.0-00010101000000-000000000000
	github.com/openai/openai-go/v3 v3.98.0
)

require (
	cloud.google.com/go/compute/metadata v0.9.0 // indirect
	github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream v1.7.20 // indirect
	github.com/bahlo/generic-list-go v0.2.0 // indirect
	github.com/buger/jsonparser v1.1.2 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/googleapis/enterprise-certificate-proxy v0.3.21 // indirect
	github.com/googleapis/gax-go/v2 v2.24.1 // indirect
	github.com/invopop/jsonschema v0.14.0 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	github.com/pb33f/ordered-map/v2 v2.3.1 // indirect
	github.com/standard-webhooks/standard-webhooks/libraries v0.0.1 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc v0.71.0 // indirect
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.71.0 // indirect
	go.opentelemetry.io/otel v1.46.0 // indirect
	go.opentelemetry.io/otel/metric v1.46.0 // indirect
	go.opentelemetry.io/otel/trace v1.46.0 // indirect
	go.yaml.in/yaml/v4 v4.0.0-rc.2 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	google.golang.org/api v0.297.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)

replace (
	github.com/keelrun/keel => ..
	github.com/keelrun/keel/activities => ../activities
	github.com/keelrun/keel/bench => ../bench
	github.com/keelrun/keel/cmd => ../cmd
	github.com/keelrun/keel/config => ../config
	github.com/keelrun/keel/deploy => ../deploy
	github.com/keelrun/keel/devserver => ../devserver
	github.com/keelrun/keel/e2e => ../e2e
	github.com/keelrun/keel/examples => ../examples
	github.com/keelrun/keel/gateway => ../gateway
	github.com/keelrun/keel/internal/keeltest => ../internal/keeltest
	github.com/keelrun/keel/internal/stack => ../internal/stack
	github.com/keelrun/keel/store => ../store
	github.com/keelrun/keel/telemetry => ../telemetry
	github.com/keelrun/keel/tool => ../tool
	github.com/keelrun/keel/worker => ../worker
	github.com/keelrun/keel/workflows => ../workflows
)
