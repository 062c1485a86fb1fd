package devserver

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/temporalio/ui-server/v2/server/api"
	"github.com/temporalio/ui-server/v2/server/auth"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/cors"
	"github.com/temporalio/ui-server/v2/server/csrf"
	"github.com/temporalio/ui-server/v2/server/headers"
	"github.com/temporalio/ui-server/v2/server/route"
	uirpc "github.com/temporalio/ui-server/v2/server/rpc"
	"github.com/temporalio/ui-server/v2/ui"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"

	"github.com/keelrun/keel/internal/httpguard"
)

// webUI serves the Temporal Web UI from ui-server's packages.
//
// ui-server's own Server binds its port inside a blocking Start that exits
// the process when the port is taken, and never closes its gRPC connection.
// Assembling the same handlers here lets Start bind the listener first (a
// busy port is an error, AnyPort is known at once) and lets Stop release
// everything.
type webUI struct {
	listener net.Listener
	http     *http.Server
	conn     *grpc.ClientConn
	done     chan struct{}
}

// uiContentSecurityPolicy is added to the UI's own policies (its index
// page's CSP meta tag pins its scripts, its header names its frame
// sources): no other site may frame the UI (its Terminate and Cancel
// buttons must not be clickjacked; the UI frames its own pages, so
// 'self' may), no plugins, no base URL elsewhere.
const uiContentSecurityPolicy = "frame-ancestors 'self'; object-src 'none'; base-uri 'self'"

// uiGuard is what every request to the UI passes first
// (internal/httpguard): the Host must name the UI (its own address,
// localhost on loopback, or one of hosts), a state-changing request must
// come from the UI's own pages (which also send echo's CSRF token), and
// every response carries keel's security headers.
func uiGuard(hosts []string) (*httpguard.Guard, error) {
	g, err := httpguard.New(httpguard.Options{AllowedHosts: hosts, ContentSecurityPolicy: uiContentSecurityPolicy, SameOriginFrames: true})
	if err != nil {
		return nil, fmt.Errorf("devserver: web UI: %w", err)
	}
	return g, nil
}

// startWebUI serves the Web UI on listener, answering to the hosts
// uiGuard allows; it reaches the frontend with frontendTLS (nil: plain
// gRPC).
func startWebUI(listener net.Listener, frontend string, frontendTLS *tls.Config, namespace, codecEndpoint string, hosts []string) (*webUI, error) {
	guard, err := uiGuard(hosts)
	if err != nil {
		return nil, err
	}
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: frontend,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		// The UI is served over plain HTTP on loopback.
		CORS:     uiconfig.CORS{CookieInsecure: true},
		HideLogs: true,
		// No calls to the internet from a dev server.
		DisableNewsFetch: true,
	}
	cfg.Codec.Endpoint = codecEndpoint
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("devserver: web UI config: %w", err)
	}
	// A zero RefreshInterval starts no refresh goroutine.
	provider, err := uiconfig.NewConfigProviderWithRefresh(cfg)
	if err != nil {
		return nil, fmt.Errorf("devserver: web UI config: %w", err)
	}
	assets, err := ui.Assets()
	if err != nil {
		return nil, fmt.Errorf("devserver: web UI assets: %w", err)
	}
	if assets, err = fs.Sub(assets, "local"); err != nil {
		return nil, fmt.Errorf("devserver: web UI assets: %w", err)
	}
	conn, err := uirpc.Dial(frontend, frontendTLS)
	if err != nil {
		return nil, fmt.Errorf("devserver: web UI connection to %s: %w", frontend, err)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(middleware.Recover(), middleware.Gzip())
	e.Use(cors.CORSMiddleware(cors.CORSConfig{
		AllowHeaders: []string{
			echo.HeaderOrigin, echo.HeaderContentType, echo.HeaderAccept,
			echo.HeaderXCSRFToken, echo.HeaderAuthorization,
			auth.AuthorizationExtrasHeader, "Caller-Type",
		},
		AllowCredentials: true,
		ConfigProvider:   provider,
	}))
	e.Use(middleware.Secure())
	// The token cookie must be minted before echo's CSRF check runs.
	e.Use(csrf.EnsureTokenCookie(false))
	e.Use(middleware.CSRFWithConfig(csrf.MiddlewareConfig(provider, false)))
	route.SetHealthRoute(e)

	forward := []api.Middleware{headers.WithForwardHeaders([]string{auth.AuthorizationExtrasHeader, "Caller-Type"})}
	writes := route.DisableWriteMiddleware(provider)
	g := e.Group("/api/v1")
	g.GET("/settings", api.GetSettings(provider))
	g.GET("/releases", api.GetLatestReleases(provider, api.NewReleaseChecker()))
	g.GET("/ui-extensions", api.GetUIExtensions(provider, api.TemporalAccessCheck(conn, forward)))
	g.GET(api.WorkflowRawHistoryUrl, api.WorkflowRawHistoryHandler(workflowservice.NewWorkflowServiceClient(conn)), writes)
	g.Match([]string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete},
		"/*", api.TemporalAPIHandler(provider, forward, conn), writes)

	if err := route.SetUIRoutes(e, "", assets, provider); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("devserver: web UI routes: %w", err)
	}
	route.SetRenderRoute(e, "/")

	w := &webUI{
		listener: listener,
		http:     httpguard.NewServer(guard.Handler(e)),
		conn:     conn,
		done:     make(chan struct{}),
	}
	go func() {
		defer close(w.done)
		// Serve returns ErrServerClosed after stop; any other error means the
		// listener broke, and the UI is simply gone: nothing to report to.
		_ = w.http.Serve(listener)
	}()
	return w, nil
}

func (w *webUI) stop() error {
	err := w.http.Close() // closes the listener too
	<-w.done
	if cerr := w.conn.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
