package devserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"

	"github.com/keelrun/keel/internal/testlog"
	"github.com/keelrun/keel/internal/testpki"
	"github.com/keelrun/keel/server/devserver"
)

// TestMutualTLSServer starts a server that requires client certificates
// and checks that its own clients, the Web UI among them, still get in,
// and that a client without a certificate does not.
func TestMutualTLSServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pki := testpki.New(t)
	s, err := devserver.Start(ctx, devserver.Config{Port: devserver.AnyPort, UIPort: devserver.AnyPort,
		TLS: pki.ServerTLS(true), Logger: testlog.New(t)})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer s.Stop()

	// Server.Dial defaults to the server's own certificate.
	c, err := s.Dial(ctx, sdkclient.Options{})
	if err != nil {
		t.Fatalf("Server.Dial: %v", err)
	}
	defer c.Close()
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: "default"}); err != nil {
		t.Fatalf("describe namespace: %v", err)
	}

	// The Web UI reaches the frontend over mutual TLS.
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + s.UIAddress() + "/api/v1/namespaces/default")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var described struct {
		NamespaceInfo struct{ Name string } `json:"namespaceInfo"`
	}
	if err := json.Unmarshal(body, &described); resp.StatusCode != http.StatusOK || err != nil || described.NamespaceInfo.Name != "default" {
		t.Fatalf("web UI: status %d, %v: %s", resp.StatusCode, err, body)
	}

	// A client that trusts the server but has no certificate is refused.
	dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
	defer dcancel()
	noCert, err := s.Dial(dctx, sdkclient.Options{ConnectionOptions: sdkclient.ConnectionOptions{
		TLS: &tls.Config{RootCAs: pki.CAs, MinVersion: tls.VersionTLS12}}})
	if err == nil {
		noCert.Close()
		t.Fatal("a client without a certificate got in")
	}
}

func TestTLSWithoutCertificate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := devserver.Start(ctx, devserver.Config{Port: devserver.AnyPort, DisableUI: true,
		TLS: &tls.Config{}, Logger: testlog.New(t)})
	if err == nil {
		s.Stop()
		t.Fatal("a server with TLS and no certificate started")
	}
	if !strings.Contains(err.Error(), "Certificates") {
		t.Fatalf("error = %v, want one that names Config.TLS's Certificates", err)
	}
}
