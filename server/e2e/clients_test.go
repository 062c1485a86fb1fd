package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/keelrun/keel/internal/syncbuf"
	"github.com/keelrun/keel/server/internal/keeltest"
)

// The HTTP clients for other languages (docs/clients.md), their route
// tables, and the gateway's OpenAPI document.
const (
	tsClientDir  = "../../clients/typescript"
	pyClientDir  = "../../clients/python"
	openAPIPath  = "../gateway/openapi.json"
	clientAPIKey = "k-clients-test-5e1f0c2b9a7d"
)

// The scripts the clients' live tests play, by the suffix of the
// KEEL_MODEL_ variable that names each.
var clientScripts = map[string]string{
	"HELLO": `{"chunk_delay":"5ms","turns":[{"text":["Hello ","from ","keel."],"usage":{"input_tokens":5,"output_tokens":3}}]}`,
	// A session's default model and another for a run of its own; each
	// answers every turn, whatever run of the session asks.
	"DEFAULT": `{"repeat":true,"turns":[{"text":["Default."]}]}`,
	"OTHER":   `{"repeat":true,"turns":[{"text":["Other."]}]}`,
	// A sleep of an hour: the run waits while it is steered and cancelled.
	"SLEEP": `{"turns":[{"text":["Waiting."],"tool_calls":[{"id":"z1","name":"sleep","arguments":{"seconds":3600}}]},{"text":["Done."]}]}`,
	"ASK": `{"turns":[{"tool_calls":[{"id":"q1","name":"ask_user","arguments":{"question":"Which colour?","schema":{"type":"string"}}}]},` +
		`{"text":["Blue ","it is."]}]}`,
}

// TestClientsAgainstGateway runs the TypeScript client's tests (node
// --test) and the Python client's (python3 -m unittest) against `keel
// dev`, the built binary in a process of its own, with scripted models
// and an API key: a run sent and streamed to run.completed, resume from an
// event id, steer, retract and cancel of a sleeping run, an ask_user
// answer, state, history, and typed errors. Each client's live tests must
// run, not skip. Without node or python3 its half is skipped, unless CI is
// set, where it fails.
func TestClientsAgainstGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	scripts := filepath.Join(dir, "scripts")
	if err := os.MkdirAll(scripts, 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"KEEL_API_KEY=" + clientAPIKey}
	for name, script := range clientScripts {
		file := "clients-" + strings.ToLower(name)
		if err := os.WriteFile(filepath.Join(scripts, file+".json"), []byte(script), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, "KEEL_MODEL_"+name+"=scripted:"+file)
	}
	keys := filepath.Join(dir, "api-keys")
	if err := os.WriteFile(keys, []byte(clientAPIKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := startKeelDev(t, ctx, "--data-dir", filepath.Join(dir, "data"), "--scripts", scripts, "--api-key-file", keys)
	env = append(env, "KEEL_GATEWAY_URL="+strings.TrimSuffix(url, "/v1"))

	t.Run("typescript", func(t *testing.T) {
		node := lookTool(t, "node")
		out := runClientTests(t, ctx, tsClientDir, append(env, "KEEL_SESSION_PREFIX=ts-clients"), node, "--test", "test/")
		// node --test's summary: every test passed and none was skipped
		// (a live test skips without KEEL_GATEWAY_URL).
		for _, want := range []string{"# fail 0", "# skipped 0"} {
			if !strings.Contains(out, want) {
				t.Errorf("node --test: no %q in its summary:\n%s", want, out)
			}
		}
	})
	t.Run("python", func(t *testing.T) {
		python := lookTool(t, "python3")
		out := runClientTests(t, ctx, pyClientDir, append(env, "KEEL_SESSION_PREFIX=py-clients", "PYTHONDONTWRITEBYTECODE=1"),
			python, "-m", "unittest", "discover", "-v", "-s", "tests", "-t", ".")
		if strings.Contains(out, "skipped") || !strings.Contains(out, "\nOK") {
			t.Errorf("python3 -m unittest: want OK with nothing skipped:\n%s", out)
		}
	})
}

// lookTool finds a command, or skips the test without it (fails with CI set).
func lookTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s is not installed: the client's tests cannot run (with CI set, this test fails instead)", name)
		}
		t.Fatalf("CI is set but %s is not installed (.ci/install installs it from Debian)", name)
	}
	return path
}

// startKeelDev runs `keel dev` with args, on free ports, without the Web
// UI, its per-user files in the test's directory, and returns the URL of
// its HTTP API once it has printed its addresses. The process is
// interrupted when the test ends.
func startKeelDev(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	args = append([]string{"dev", "--no-ui", "--port", "0", "--nats-port", "0", "--http-port", "0", "--metrics-address", ""}, args...)
	cmd := exec.CommandContext(ctx, keeltest.KeelBinary(t), args...)
	cmd.Env = append(os.Environ(), "KEEL_CONFIG_DIR="+t.TempDir())
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	url := ""
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) >= 3 && f[0] == "HTTP" && f[1] == "API" {
			url = f[2]
		}
		if strings.HasPrefix(lines.Text(), "Try it") {
			break
		}
	}
	if url == "" {
		t.Fatalf("keel dev did not come up (%v):\n%s", lines.Err(), stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return url
}

// runClientTests runs a client's test command in dir and returns its
// output; a failing command fails the test.
func runClientTests(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}

// routeTable is a client's routes.json: the OpenAPI operations it calls,
// with their query and header parameters and the schemas of their bodies
// and answers, the operations it leaves to others, and the fields of each
// schema it knows (nested objects as dotted names).
type routeTable struct {
	Operations map[string]tableOperation `json:"operations"`
	NotCovered map[string]string         `json:"not_covered"`
	Schemas    map[string][]string       `json:"schemas"`
}

type tableOperation struct {
	Method   string   `json:"method"`
	Path     string   `json:"path"`
	Query    []string `json:"query"`
	Headers  []string `json:"headers"`
	Body     string   `json:"body"`
	Response string   `json:"response"`
}

// TestClientRoutesMatchOpenAPI: each client's routes.json names every
// operation of server/gateway/openapi.json (or says why it leaves one out), with
// the document's method, path, parameters and schemas, and each schema
// with exactly the document's fields; the TypeScript client's index.d.ts
// declares each schema with those fields. The clients' own tests check
// that their calls and types follow their tables.
func TestClientRoutesMatchOpenAPI(t *testing.T) {
	doc := readJSON(t, openAPIPath)
	for _, path := range []string{tsClientDir + "/routes.json", pyClientDir + "/keel_client/routes.json"} {
		var table routeTable
		remarshal(t, readJSON(t, path), &table)
		for _, m := range routeMismatches(doc, table) {
			t.Errorf("%s: %s", path, m)
		}
	}
	var table routeTable
	remarshal(t, readJSON(t, tsClientDir+"/routes.json"), &table)
	dts, err := os.ReadFile(tsClientDir + "/index.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range declarationMismatches(string(dts), table) {
		t.Errorf("%s/index.d.ts: %s", tsClientDir, m)
	}
}

// TestClientRoutesCheckCatchesMismatch changes a copy of the document, of
// a table or of the declarations in each way the check must catch, and
// expects a mismatch that names what changed.
func TestClientRoutesCheckCatchesMismatch(t *testing.T) {
	doc := readJSON(t, openAPIPath)
	var table routeTable
	remarshal(t, readJSON(t, tsClientDir+"/routes.json"), &table)
	if m := routeMismatches(doc, table); len(m) > 0 {
		t.Fatalf("the unchanged copies differ already: %v", m)
	}
	schema := func(d map[string]any, name string) map[string]any {
		return dig(d, "components", "schemas", name).(map[string]any)
	}
	docCases := []struct {
		name, want string
		change     func(d map[string]any)
	}{
		{"a request field the clients lack", "RunRequest.priority", func(d map[string]any) {
			dig(schema(d, "RunRequest"), "properties").(map[string]any)["priority"] = map[string]any{"type": "number"}
		}},
		{"a response field gone", "SessionsResponse.web_ui", func(d map[string]any) {
			delete(dig(schema(d, "SessionsResponse"), "properties").(map[string]any), "web_ui")
		}},
		{"a nested field the clients lack", "SessionStatus.active_run.started_at", func(d map[string]any) {
			dig(schema(d, "SessionStatus"), "properties", "active_run", "properties").(map[string]any)["started_at"] = map[string]any{"type": "string"}
		}},
		{"a new route", "forkSession", func(d map[string]any) {
			d["paths"].(map[string]any)["/v1/sessions/{id}/fork"] = map[string]any{"post": map[string]any{
				"operationId": "forkSession", "responses": map[string]any{"200": map[string]any{"description": "ok"}}}}
		}},
		{"a route gone", "listRequests", func(d map[string]any) {
			delete(d["paths"].(map[string]any), "/v1/sessions/{id}/requests")
		}},
		{"a new query parameter", "getSession: query", func(d map[string]any) {
			op := dig(d, "paths", "/v1/sessions/{id}", "get").(map[string]any)
			op["parameters"] = append(op["parameters"].([]any), map[string]any{"name": "wait", "in": "query"})
		}},
		{"another method", "cancel: method", func(d map[string]any) {
			p := dig(d, "paths", "/v1/sessions/{id}/cancel").(map[string]any)
			p["put"], p["post"] = p["post"], nil
			delete(p, "post")
		}},
		{"another answer schema", "steer: response", func(d map[string]any) {
			dig(d, "paths", "/v1/sessions/{id}/steer", "post", "responses", "200", "content", "application/json", "schema").(map[string]any)["$ref"] = "#/components/schemas/StatusResponse"
		}},
	}
	for _, c := range docCases {
		t.Run(c.name, func(t *testing.T) {
			d := readJSON(t, openAPIPath)
			c.change(d)
			if m := routeMismatches(d, table); !mentions(m, c.want) {
				t.Errorf("mismatches %q, want one naming %q", m, c.want)
			}
		})
	}
	t.Run("a table field the document lacks", func(t *testing.T) {
		var tb routeTable
		remarshal(t, readJSON(t, tsClientDir+"/routes.json"), &tb)
		tb.Schemas["RunResponse"] = append(tb.Schemas["RunResponse"], "eta")
		if m := routeMismatches(doc, tb); !mentions(m, "RunResponse.eta") {
			t.Errorf("mismatches %q, want one naming RunResponse.eta", m)
		}
	})
	t.Run("a declaration without a field", func(t *testing.T) {
		b, err := os.ReadFile(tsClientDir + "/index.d.ts")
		if err != nil {
			t.Fatal(err)
		}
		dts := string(b)
		if m := declarationMismatches(dts, table); len(m) > 0 {
			t.Fatalf("the unchanged declarations differ already: %v", m)
		}
		cut := strings.Replace(dts, "  repeated?: boolean;\n}", "}", 1)
		if cut == dts {
			t.Fatal("index.d.ts no longer ends RunResponse with repeated")
		}
		if m := declarationMismatches(cut, table); !mentions(m, "RunResponse.repeated") {
			t.Errorf("mismatches %q, want one naming RunResponse.repeated", m)
		}
		nested := strings.Replace(dts, "    base_seq: number;\n  };", "  };", 1)
		if m := declarationMismatches(nested, table); !mentions(m, "SessionStatus.active_run.base_seq") {
			t.Errorf("mismatches %q, want one naming SessionStatus.active_run.base_seq", m)
		}
	})
}

// routeMismatches compares a client's table with the OpenAPI document.
func routeMismatches(doc map[string]any, table routeTable) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	ops := openAPIOperations(doc)
	needed := map[string]bool{}
	for id, op := range ops {
		mine, covered := table.Operations[id]
		if _, skipped := table.NotCovered[id]; skipped {
			if covered {
				bad("%s: both covered and not covered", id)
			}
			continue
		}
		if !covered {
			bad("%s (%s %s): in the document, not in the client", id, op.Method, op.Path)
			continue
		}
		for _, f := range []struct{ what, got, want string }{
			{"method", mine.Method, op.Method}, {"path", mine.Path, op.Path},
			{"body", mine.Body, op.Body}, {"response", mine.Response, op.Response},
		} {
			if f.got != f.want {
				bad("%s: %s %q in the client, %q in the document", id, f.what, f.got, f.want)
			}
		}
		if d := setDiff(mine.Query, op.Query); d != "" {
			bad("%s: query parameters %s", id, d)
		}
		if d := setDiff(mine.Headers, op.Headers); d != "" {
			bad("%s: headers %s", id, d)
		}
		for _, s := range append(op.refs, op.Body, op.Response) {
			if s != "" {
				schemaClosure(doc, s, needed)
			}
		}
	}
	for id := range table.Operations {
		if _, ok := ops[id]; !ok {
			bad("%s: in the client, not in the document", id)
		}
	}
	for id := range table.NotCovered {
		if _, ok := ops[id]; !ok {
			bad("%s: listed as not covered, not in the document", id)
		}
	}
	for name := range needed {
		fields, ok := table.Schemas[name]
		if !ok {
			bad("schema %s: in the document, not in the client", name)
			continue
		}
		s, _ := dig(doc, "components", "schemas", name).(map[string]any)
		if d := setDiff(prefixed(name, fields), prefixed(name, schemaFields(s, ""))); d != "" {
			bad("schema %s: fields %s", name, d)
		}
	}
	for name := range table.Schemas {
		if !needed[name] {
			bad("schema %s: in the client, not used by its operations in the document", name)
		}
	}
	sort.Strings(out)
	return out
}

// openAPIOperation is what the check reads of one documented operation.
type openAPIOperation struct {
	Method, Path, Body, Response string
	Query, Headers               []string
	refs                         []string // schemas of its error answers
}

func openAPIOperations(doc map[string]any) map[string]openAPIOperation {
	ops := map[string]openAPIOperation{}
	paths, _ := doc["paths"].(map[string]any)
	for path, v := range paths {
		item, _ := v.(map[string]any)
		shared, _ := item["parameters"].([]any)
		for method, raw := range item {
			o, ok := raw.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			op := openAPIOperation{Method: strings.ToUpper(method), Path: path}
			params, _ := o["parameters"].([]any)
			for _, p := range append(slices.Clone(shared), params...) {
				pm, _ := p.(map[string]any)
				name, _ := pm["name"].(string)
				switch pm["in"] {
				case "query":
					op.Query = append(op.Query, name)
				case "header":
					op.Headers = append(op.Headers, name)
				}
			}
			op.Body = refName(dig(o, "requestBody", "content", "application/json", "schema", "$ref"))
			responses, _ := o["responses"].(map[string]any)
			codes := make([]string, 0, len(responses))
			for code := range responses {
				codes = append(codes, code)
			}
			sort.Strings(codes)
			for _, code := range codes {
				r, _ := responses[code].(map[string]any)
				if ref := refName(r["$ref"]); ref != "" {
					r, _ = dig(doc, "components", "responses", ref).(map[string]any)
				}
				s := refName(dig(r, "content", "application/json", "schema", "$ref"))
				switch {
				case strings.HasPrefix(code, "2") && op.Response == "":
					op.Response = s
				case s != "":
					op.refs = append(op.refs, s)
				}
			}
			id, _ := o["operationId"].(string)
			ops[id] = op
		}
	}
	return ops
}

// schemaClosure adds name and every schema its fields refer to.
func schemaClosure(doc map[string]any, name string, into map[string]bool) {
	if into[name] {
		return
	}
	into[name] = true
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ref := refName(x["$ref"]); ref != "" {
				schemaClosure(doc, ref, into)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(dig(doc, "components", "schemas", name))
}

// schemaFields lists a schema's properties, and those of its inline
// objects and arrays of inline objects as dotted names; a $ref is a
// schema of its own.
func schemaFields(s map[string]any, prefix string) []string {
	props, _ := s["properties"].(map[string]any)
	var out []string
	for name, v := range props {
		out = append(out, prefix+name)
		p, _ := v.(map[string]any)
		if items, ok := p["items"].(map[string]any); ok && p["type"] == "array" {
			p = items
		}
		if _, ok := p["$ref"]; !ok {
			out = append(out, schemaFields(p, prefix+name+".")...)
		}
	}
	return out
}

var (
	declInterface = regexp.MustCompile(`^export interface ([A-Za-z_][A-Za-z0-9_]*)\b.*\{$`)
	declField     = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\??:\s*(.*)$`)
	declClose     = regexp.MustCompile(`^\s*\}`)
)

// declarationMismatches compares the interfaces of index.d.ts named after
// the table's schemas with the table's fields. It reads the file's own
// layout: one field a line, an inline object opened at the end of its
// field's line ("{" or "Array<{") and closed on a line of its own.
func declarationMismatches(dts string, table routeTable) []string {
	declared := map[string][]string{}
	var current string
	var nest []string
	for _, line := range strings.Split(dts, "\n") {
		if current == "" {
			if m := declInterface.FindStringSubmatch(line); m != nil {
				current, nest = m[1], nil
				declared[current] = []string{}
			}
			continue
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "//"), strings.HasPrefix(trimmed, "/*"), strings.HasPrefix(trimmed, "*"):
		case declClose.MatchString(line):
			if len(nest) == 0 {
				current = ""
			} else {
				nest = nest[:len(nest)-1]
			}
		default:
			if m := declField.FindStringSubmatch(line); m != nil {
				name := strings.Join(append(slices.Clone(nest), m[1]), ".")
				declared[current] = append(declared[current], name)
				if strings.HasSuffix(m[2], "{") {
					nest = append(nest, m[1])
				}
			}
		}
	}
	var out []string
	for name, fields := range table.Schemas {
		got, ok := declared[name]
		if !ok {
			out = append(out, fmt.Sprintf("no interface %s", name))
			continue
		}
		if d := setDiff(prefixed(name, got), prefixed(name, fields)); d != "" {
			out = append(out, fmt.Sprintf("interface %s: fields %s", name, d))
		}
	}
	sort.Strings(out)
	return out
}

// setDiff describes how got and want differ as sets ("" when equal).
func setDiff(got, want []string) string {
	var extra, missing []string
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			missing = append(missing, w)
		}
	}
	if len(extra)+len(missing) == 0 {
		return ""
	}
	sort.Strings(extra)
	sort.Strings(missing)
	return fmt.Sprintf("only in the client %v, only in the document %v", extra, missing)
}

func prefixed(schema string, fields []string) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = schema + "." + f
	}
	return out
}

func refName(v any) string {
	s, _ := v.(string)
	return s[strings.LastIndex(s, "/")+1:]
}

// dig walks nested JSON objects by key; nil when a key is missing.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func mentions(mismatches []string, s string) bool {
	for _, m := range mismatches {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func remarshal(t *testing.T, from, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(b, to)
	}
	if err != nil {
		t.Fatal(err)
	}
}
