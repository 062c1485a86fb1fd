//go:build !nodev

package main

import (
	"context"
	"fmt"

	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/client"
)

// recordCodecEndpoint writes keel dev's codec endpoint into the
// namespace's data (client.CodecEndpointKey), on every start, the default
// port included, so no earlier run's port stays behind: a reader on this
// machine then finds it without --codec-endpoint (client.LearnCodecEndpoint).
func recordCodecEndpoint(ctx context.Context, tc sdkclient.Client, namespace, endpoint string) error {
	_, err := tc.WorkflowService().UpdateNamespace(ctx, &workflowservice.UpdateNamespaceRequest{
		Namespace:  namespace,
		UpdateInfo: &namespacepb.UpdateNamespaceInfo{Data: map[string]string{client.CodecEndpointKey: endpoint}},
	})
	if err != nil {
		return fmt.Errorf("keel dev: record the codec endpoint in namespace %s: %w", namespace, err)
	}
	return nil
}
