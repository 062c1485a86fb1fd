package deploy

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/keelrun/keel/server/devserver"
)

// compose is the part of a compose file the test reads.
type compose struct {
	Services map[string]service `yaml:"services"`
}

type service struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Restart     string            `yaml:"restart"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	Deploy struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(false)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("docker-compose.yml does not parse: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("docker-compose.yml has no services")
	}
	return c
}

// oneShot services run once and exit (schema setup, namespace, bucket):
// restarted on failure, waited for with service_completed_successfully.
func (s service) oneShot() bool { return s.Restart == "on-failure" }

// pinnedTag is an image reference with a version tag or a digest.
var pinnedTag = regexp.MustCompile(`^[a-z0-9./_-]+(:[A-Za-z0-9._-]*[0-9][A-Za-z0-9._-]*)?(@sha256:[0-9a-f]{64})?$`)

func pinned(image string) bool {
	if !pinnedTag.MatchString(image) || strings.HasSuffix(image, ":latest") {
		return false
	}
	return strings.Contains(image, ":") || strings.Contains(image, "@")
}

func TestComposeImagesPinned(t *testing.T) {
	c := loadCompose(t)
	serverVersion := goModVersion(t, "go.temporal.io/server")
	for name, s := range c.Services {
		switch {
		case s.Build != nil:
			// Built from the root Dockerfile, whose base images are checked below.
			if s.Image != "keel:local" {
				t.Errorf("%s: built image named %q, want keel:local (one image for every keel service)", name, s.Image)
			}
		case s.Image == "":
			t.Errorf("%s: no image", name)
		case !pinned(s.Image):
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
		}
		if strings.Contains(s.Image, "auto-setup") {
			t.Errorf("%s: %s is Temporal's deprecated auto-setup image", name, s.Image)
		}
		for _, repo := range []string{"temporalio/server", "temporalio/admin-tools"} {
			if strings.HasPrefix(s.Image, repo+":") && s.Image != repo+":"+strings.TrimPrefix(serverVersion, "v") {
				t.Errorf("%s: %s, want the version of go.temporal.io/server in server/go.mod (%s)", name, s.Image, serverVersion)
			}
		}
	}
	dockerfile, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	froms := 0
	for line := range strings.Lines(string(dockerfile)) {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.EqualFold(f[0], "FROM") {
			froms++
			if !pinned(f[1]) {
				t.Errorf("Dockerfile: FROM %s is not pinned to a version", f[1])
			}
		}
	}
	if froms == 0 {
		t.Error("Dockerfile has no FROM")
	}
}

func TestComposeHealthAndRestarts(t *testing.T) {
	c := loadCompose(t)
	awaited := map[string]bool{}
	for name, s := range c.Services {
		for dep, d := range s.DependsOn {
			ds, ok := c.Services[dep]
			if !ok {
				t.Errorf("%s depends on %s, which is not a service", name, dep)
				continue
			}
			switch {
			case ds.oneShot() && d.Condition != "service_completed_successfully":
				t.Errorf("%s waits for one-shot %s with %q, want service_completed_successfully", name, dep, d.Condition)
			case !ds.oneShot() && d.Condition == "service_healthy" && len(ds.Healthcheck.Test) == 0:
				t.Errorf("%s waits for %s to be healthy, which has no health check", name, dep)
			}
			awaited[dep] = true
		}
	}
	for name, s := range c.Services {
		switch {
		case s.oneShot():
			if !awaited[name] {
				t.Errorf("one-shot %s: nothing waits for it", name)
			}
		case s.Restart != "always" && s.Restart != "unless-stopped":
			t.Errorf("%s: restart %q, want always or unless-stopped", name, s.Restart)
		case len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] == "NONE":
			t.Errorf("%s: no health check", name)
		}
	}
	w := c.Services["worker"]
	if w.Deploy.Replicas < 2 {
		t.Errorf("worker: %d replicas, want at least 2", w.Deploy.Replicas)
	}
	// The workers wait for the namespace, and register keel's search
	// attributes themselves (worker.EnsureSearchAttributes, which retries).
	if w.DependsOn["temporal-namespace"].Condition != "service_completed_successfully" {
		t.Error("worker does not wait for the namespace job")
	}
}

// TestComposeWorkerEnvironment: every environment variable keel's code
// reads (found in its source: os.Getenv and os.LookupEnv of a literal, and
// string constants named env…/Env…) is set for the workers, or listed
// here with the reason it is not; and every KEEL_, TEMPORAL_ or OTEL_
// variable set for them is one the code reads.
func TestComposeWorkerEnvironment(t *testing.T) {
	notForWorkers := map[string]string{
		"TEMPORAL_API_KEY":                       "compose's Temporal has no API keys; set it for one that does",
		"TEMPORAL_TLS":                           "compose's Temporal serves plain gRPC; set the TLS variables for one with TLS",
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH":       "as TEMPORAL_TLS",
		"TEMPORAL_TLS_CLIENT_CERT_PATH":          "as TEMPORAL_TLS",
		"TEMPORAL_TLS_CLIENT_KEY_PATH":           "as TEMPORAL_TLS",
		"TEMPORAL_TLS_SERVER_NAME":               "as TEMPORAL_TLS",
		"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "as TEMPORAL_TLS",
		"TEMPORAL_PROFILE":                       "the TEMPORAL_* variables say it all; no configuration file in the image",
		"TEMPORAL_CONFIG_FILE":                   "as TEMPORAL_PROFILE",
		"KEEL_CODEC_ENDPOINT":                    "readers only (keel run, events, history); workers read the store",
		"KEEL_CODEC_TOKEN":                       "the codec service's, not the workers'",
		"KEEL_API_KEYS":                          "keel serve's (the HTTP API)",
		"NO_COLOR":                               "terminal output of the reading commands",
		"KEEL_POSTGRES_DSN":                      "tests only (server/internal/keeltest)",
		"KEEL_BIN":                               "tests only (server/internal/keeltest): a built keel to run instead of building one",
		"KEEL_CONFIG_DIR":                        "keel dev's per-user records; a worker is told where NATS is",
		"KEEL_NATS_ACCEPT_PLAINTEXT":             "readers with keys during a migration; workers publish, they do not read deltas",
		"KEEL_NATS_TOKEN_FILE":                   "compose passes the token itself (KEEL_NATS_TOKEN); mount a file instead where secrets are files",
		"KEEL_NATS_USER":                         "compose's NATS authenticates with a token; set these for a NATS with users",
		"KEEL_NATS_PASSWORD":                     "as KEEL_NATS_USER",
		"KEEL_NATS_PASSWORD_FILE":                "as KEEL_NATS_USER",
		"KEEL_NATS_NKEY_FILE":                    "as KEEL_NATS_USER",
		"KEEL_NATS_CREDS_FILE":                   "as KEEL_NATS_USER",
		"KEEL_NATS_TLS_CA_FILE":                  "compose's NATS is reached on the compose network without TLS; set the TLS variables for one with TLS",
		"KEEL_NATS_TLS_CERT_FILE":                "as KEEL_NATS_TLS_CA_FILE",
		"KEEL_NATS_TLS_KEY_FILE":                 "as KEEL_NATS_TLS_CA_FILE",
		"KEEL_NATS_TLS_SERVER_NAME":              "as KEEL_NATS_TLS_CA_FILE",
	}
	c := loadCompose(t)
	env := c.Services["worker"].Environment
	read := envReadByCode(t)
	for _, name := range slices.Sorted(maps.Keys(read)) {
		if _, set := env[name]; set {
			continue
		}
		if _, ok := notForWorkers[name]; !ok {
			t.Errorf("keel reads $%s (%s) and the workers in docker-compose.yml do not set it; set it, or say here why not", name, read[name])
		}
	}
	for name := range env {
		for _, prefix := range []string{"KEEL_", "TEMPORAL_", "OTEL_"} {
			if strings.HasPrefix(name, prefix) && read[name] == "" {
				t.Errorf("the workers set $%s, which keel's code never reads", name)
			}
		}
	}
	for name := range notForWorkers {
		if read[name] == "" {
			t.Errorf("notForWorkers lists $%s, which keel's code no longer reads", name)
		}
	}
	// An s3:// store is reached with the AWS SDK's credentials.
	if u, err := url.Parse(env["KEEL_STORE"]); err != nil || u.Scheme != "s3" {
		t.Errorf("KEEL_STORE %q: want the MinIO bucket (s3://)", env["KEEL_STORE"])
	} else if u.Query().Get("endpoint") != "http://minio:9000" {
		t.Errorf("KEEL_STORE %q does not point at the minio service", env["KEEL_STORE"])
	}
	for _, name := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if env[name] == "" {
			t.Errorf("the workers' s3:// store needs $%s", name)
		}
	}
	if env["TEMPORAL_ADDRESS"] != "temporal:7233" {
		t.Errorf("TEMPORAL_ADDRESS %q, want the temporal service", env["TEMPORAL_ADDRESS"])
	}
	codec := c.Services["codec"].Environment
	if codec["KEEL_STORE"] != env["KEEL_STORE"] || codec["KEEL_ENCRYPTION_KEY_FILE"] != env["KEEL_ENCRYPTION_KEY_FILE"] {
		t.Error("the codec service reads another store or other keys than the workers")
	}
}

// TestComposeWiring: Prometheus scrapes the workers where they serve
// metrics, the Web UI's codec endpoint is the codec service's published
// port, and the server reads the dynamic config file mounted for it.
func TestComposeWiring(t *testing.T) {
	c := loadCompose(t)
	w := c.Services["worker"]
	metrics := flagValue(w.Command, "--metrics-address")
	if metrics != "0.0.0.0:9464" {
		t.Errorf("worker --metrics-address %q, want 0.0.0.0:9464 (reachable by Prometheus)", metrics)
	}
	prom, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var pc struct {
		ScrapeConfigs []struct {
			DNSSD []struct {
				Names []string `yaml:"names"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(prom, &pc); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	scraped := false
	for _, sc := range pc.ScrapeConfigs {
		for _, d := range sc.DNSSD {
			scraped = scraped || (slices.Contains(d.Names, "worker") && strconv.Itoa(d.Port) == strings.TrimPrefix(metrics, "0.0.0.0:"))
		}
	}
	if !scraped {
		t.Error("prometheus.yml does not scrape every worker replica on its metrics port")
	}
	if !slices.Contains(c.Services["prometheus"].Volumes, "./server/deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro") {
		t.Error("prometheus does not mount server/deploy/prometheus.yml")
	}

	codec := c.Services["codec"]
	listen := flagValue(codec.Command, "--listen")
	_, port, _ := strings.Cut(listen, ":")
	ui := c.Services["temporal-ui"].Environment["TEMPORAL_CODEC_ENDPOINT"]
	if ui != "http://localhost:"+port+"/codec" || !slices.Contains(codec.Ports, port+":"+port) {
		t.Errorf("the Web UI's codec endpoint %q is not the codec service's published --listen %s", ui, listen)
	}
	if origin := flagValue(codec.Command, "--cors-origin"); !slices.Contains(c.Services["temporal-ui"].Ports, strings.TrimPrefix(origin, "http://localhost:")+":8080") {
		t.Errorf("the codec's --cors-origin %q is not the Web UI's published address", origin)
	}
	// The browser names the codec endpoint by the UI's setting's host,
	// which is not the container's own address: the endpoint must allow it.
	if u, err := url.Parse(ui); err != nil || flagValue(codec.Command, "--allowed-host") != u.Hostname() {
		t.Errorf("the codec's --allowed-host %q is not the host of the Web UI's codec endpoint %q", flagValue(codec.Command, "--allowed-host"), ui)
	}

	temporal := c.Services["temporal"]
	path := temporal.Environment["DYNAMIC_CONFIG_FILE_PATH"]
	if !slices.Contains(temporal.Volumes, "./server/deploy/temporal-dynamicconfig.yaml:"+path+":ro") {
		t.Errorf("the server reads dynamic config from %q, where server/deploy/temporal-dynamicconfig.yaml is not mounted", path)
	}
	if temporal.Environment["DB"] != "postgres12" {
		t.Errorf("the server's DB is %q, want postgres12", temporal.Environment["DB"])
	}
}

// TestDynamicConfigMatchesDevServer: the server in compose runs with the
// tuning `keel dev` measured (devserver.TunedDynamicConfig), key for key.
func TestDynamicConfigMatchesDevServer(t *testing.T) {
	raw, err := os.ReadFile("temporal-dynamicconfig.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string][]struct {
		Value any `yaml:"value"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatalf("temporal-dynamicconfig.yaml: %v", err)
	}
	got := map[string]string{}
	for k, v := range file {
		if len(v) != 1 {
			t.Errorf("%s: %d values, want one for every namespace", k, len(v))
			continue
		}
		got[strings.ToLower(k)] = fmt.Sprint(v[0].Value)
	}
	want := map[string]string{}
	for k, v := range devserver.TunedDynamicConfig() {
		want[strings.ToLower(k)] = fmt.Sprint(v)
	}
	for k, w := range want {
		g, ok := got[k]
		if d, err := time.ParseDuration(g); err == nil {
			g = d.String()
		}
		if !ok || g != w {
			t.Errorf("%s: compose has %q, keel dev %q", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: in compose only; keel dev runs without it", k)
		}
	}
}

// flagValue returns the value after flag in a command line.
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// goModVersion returns the version of module in the server module's
// go.mod, whose devserver embeds the Temporal server.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	f, err := os.Open("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(lines.Text()), "require "))
		if len(fields) >= 2 && fields[0] == module {
			return fields[1]
		}
	}
	t.Fatalf("server/go.mod does not require %s", module)
	return ""
}

// envReadByCode returns the environment variables keel's non-test Go code
// reads, each with where it is read.
func envReadByCode(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && path != "../..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) && isEnvConstName(name.Name) {
						if s, ok := stringLit(n.Values[i]); ok {
							vars[s] = fset.Position(name.Pos()).String()
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || len(n.Args) == 0 {
					return true
				}
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv") {
					if s, ok := stringLit(n.Args[0]); ok {
						vars[s] = fset.Position(n.Pos()).String()
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(vars) < 10 {
		t.Fatalf("found only %d environment variables in keel's code: %v", len(vars), vars)
	}
	return vars
}

var envConstName = regexp.MustCompile(`^[eE]nv[A-Z0-9_]`)

func isEnvConstName(name string) bool { return envConstName.MatchString(name) }

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil && regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(s)
}
