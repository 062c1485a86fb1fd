package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/keelrun/keel/server/devserver"
	"github.com/keelrun/keel/server/internal/keeltest"
	"github.com/keelrun/keel/server/worker"
)

// TestEnsureSearchAttributesConcurrently starts four workers' registration
// at once on a namespace that does not exist yet and is created while they
// wait (as a deployment's setup job and its workers start together): every
// one succeeds, and each of keel's attributes ends up mapped to exactly one
// column with its type.
func TestEnsureSearchAttributesConcurrently(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := keeltest.StartServer(t, devserver.Config{})
	c, err := srv.Dial(ctx, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	const namespace = "fresh"
	const workers = 4
	errs := make(chan error, workers)
	var started sync.WaitGroup
	for range workers {
		started.Add(1)
		go func() {
			started.Done()
			errs <- worker.EnsureSearchAttributes(ctx, c, namespace)
		}()
	}
	started.Wait()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Errorf("EnsureSearchAttributes: %v", err)
		}
	}

	// The namespace's own record (not the cache behind the list API):
	// every attribute once, on a column of its type.
	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	columns := map[string][]string{}
	for field, alias := range ns.GetConfig().GetCustomSearchAttributeAliases() {
		columns[alias] = append(columns[alias], field)
	}
	for name, typ := range worker.SearchAttributes() {
		if len(columns[name]) != 1 {
			t.Errorf("%s is mapped to columns %v, want one", name, columns[name])
			continue
		}
		want := map[enumspb.IndexedValueType]string{
			enumspb.INDEXED_VALUE_TYPE_KEYWORD: "Keyword", enumspb.INDEXED_VALUE_TYPE_INT: "Int"}[typ]
		if field := columns[name][0]; len(field) < len(want) || field[:len(want)] != want {
			t.Errorf("%s is on column %s, want a %s column", name, field, want)
		}
	}

}
