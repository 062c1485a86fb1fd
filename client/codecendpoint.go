package client

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/keelrun/keel/connect"
)

// CodecEndpointKey is the key of the Temporal namespace's data map under
// which `keel dev` records its codec endpoint, so readers of that server
// find it on another --http-port without being told (docs/devserver.md).
const CodecEndpointKey = "keel.codec_endpoint"

// errNotLoopback says an address or endpoint is not on this machine.
var errNotLoopback = errors.New("client: not a loopback address")

// LearnCodecEndpoint returns the codec endpoint that `keel dev` recorded in
// the data of the namespace conn names, or "" when there is none. It asks
// only a Temporal server on this machine (a loopback address, as keel dev
// listens on), and accepts only an http or https URL on a loopback host,
// without credentials, query or fragment: a server elsewhere, or one that
// records any other URL, could otherwise send this client's payloads
// wherever it likes. A server it cannot reach is an error (a
// *connect.DialError); a server that does not answer the namespace's
// description is "" and no error.
// logger is the Temporal client's logger for the short connection it
// makes; nil: the SDK's default.
func LearnCodecEndpoint(ctx context.Context, conn connect.Options, logger tlog.Logger) (string, error) {
	resolved, err := conn.Resolve()
	if err != nil {
		return "", err
	}
	if !loopbackHostPort(resolved.HostPort) {
		return "", nil
	}
	tc, err := connect.Dial(ctx, conn, client.Options{Logger: logger})
	if err != nil {
		return "", err
	}
	defer tc.Close()
	return codecEndpointOf(ctx, tc.WorkflowService(), resolved.Namespace), nil
}

// codecEndpointOf reads CodecEndpointKey from namespace's data, "" when it
// is missing or not a loopback URL.
func codecEndpointOf(ctx context.Context, svc workflowservice.WorkflowServiceClient, namespace string) string {
	resp, err := svc.DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
	if err != nil {
		return ""
	}
	endpoint := resp.GetNamespaceInfo().GetData()[CodecEndpointKey]
	if checkLoopbackEndpoint(endpoint) != nil {
		return ""
	}
	return endpoint
}

// checkLoopbackEndpoint accepts an http or https URL on a loopback host
// ("localhost", 127.0.0.0/8, ::1), without user info, query or fragment.
func checkLoopbackEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || !loopbackHost(u.Hostname()) {
		return errNotLoopback
	}
	return nil
}

// loopbackHostPort reports whether hostPort names a loopback host.
func loopbackHostPort(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	return loopbackHost(host)
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
