package store

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// open opens rawURL and closes it when the test ends.
func open(t *testing.T, rawURL string) *Store {
	t.Helper()
	s, err := Open(context.Background(), rawURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// jsonPayload is a payload as the default data converter makes it, with
// n bytes of data.
func jsonPayload(t *testing.T, n int) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(strings.Repeat("x", n))
	require.NoError(t, err)
	return p
}
