// Package httpguard holds what every HTTP listener of keel (the HTTP API
// and its web page, the codec endpoint, the embedded Temporal Web UI,
// /metrics) checks before a handler sees a request, the headers it sets on
// every response, and the http.Server it runs on:
//
//   - the Host header must name the listener: its own address (the
//     connection's local address, so a listener on 0.0.0.0 works), a
//     loopback name (localhost, 127.0.0.1, [::1]) when the connection is
//     on loopback, or a name the operator configured (Options.AllowedHosts).
//     A web page whose name an attacker made resolve to 127.0.0.1 (DNS
//     rebinding) sends its own name, and gets 403 host_not_allowed;
//   - a state-changing request from another origin (http.CrossOriginProtection:
//     Sec-Fetch-Site, else Origin against Host) gets 403 origin_not_allowed,
//     unless its origin is trusted (Options.TrustedOrigins);
//   - every response carries a Content-Security-Policy,
//     X-Frame-Options: DENY, X-Content-Type-Options: nosniff and
//     Referrer-Policy: no-referrer, whatever the handler set;
//   - RequireJSON refuses a body that is not declared application/json
//     (415 unsupported_media_type), which keeps a cross-origin form or
//     text/plain POST (a "simple" request a browser sends without asking)
//     out of JSON endpoints;
//   - NewServer returns an http.Server with read-header, read, write and
//     idle timeouts (DefaultReadHeaderTimeout and the others).
//
// Errors are answered as JSON {"code","message"} on listeners that speak
// JSON (Options.JSON) and as plain text elsewhere.
//
//	g, err := httpguard.New(httpguard.Options{AllowedHosts: []string{"keel.example"}})
//	if err != nil {
//		return err
//	}
//	srv := httpguard.NewServer(g.Handler(mux))
//	go srv.Serve(listener)
package httpguard
