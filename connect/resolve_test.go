package connect_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel/connect"
)

// env is an environment for connect.Options.Env.
type env map[string]string

func (e env) Environ() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func (e env) LookupEnv(k string) (string, bool) { v, ok := e[k]; return v, ok }

const profiles = `
[profile.default]
address = "file-default:7233"
namespace = "file-ns"

[profile.cloud]
address = "cloud.example:7233"
namespace = "cloud-ns"
api_key = "profile-key"

[profile.mtls]
address = "mtls.example:7233"
[profile.mtls.tls]
server_name = "name-from-file"
`

func writeProfiles(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "temporal.toml")
	if err := os.WriteFile(path, []byte(profiles), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// resolved is what a test checks of the resolved options.
type resolved struct {
	HostPort, Namespace string
	TLS, APIKey         bool
	ServerName          string
}

func TestResolvePrecedence(t *testing.T) {
	file := writeProfiles(t)
	tests := []struct {
		name string
		opts connect.Options
		env  env
		want resolved
	}{
		{"nothing anywhere", connect.Options{ConfigFile: filepath.Join(t.TempDir(), "missing.toml")}, env{},
			resolved{HostPort: "localhost:7233", Namespace: "default"}},
		{"the default profile", connect.Options{ConfigFile: file}, env{},
			resolved{HostPort: "file-default:7233", Namespace: "file-ns"}},
		{"the file from the environment", connect.Options{}, env{"TEMPORAL_CONFIG_FILE": file},
			resolved{HostPort: "file-default:7233", Namespace: "file-ns"}},
		{"the environment over the file", connect.Options{ConfigFile: file},
			env{"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_NAMESPACE": "env-ns"},
			resolved{HostPort: "env:7233", Namespace: "env-ns"}},
		{"options over the environment", connect.Options{ConfigFile: file, HostPort: "flag:7233", Namespace: "flag-ns"},
			env{"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_NAMESPACE": "env-ns"},
			resolved{HostPort: "flag:7233", Namespace: "flag-ns"}},
		{"a profile from the environment, with an API key that turns TLS on", connect.Options{ConfigFile: file},
			env{"TEMPORAL_PROFILE": "cloud"},
			resolved{HostPort: "cloud.example:7233", Namespace: "cloud-ns", TLS: true, APIKey: true}},
		{"a profile named in options over the environment's", connect.Options{ConfigFile: file, Profile: "mtls"},
			env{"TEMPORAL_PROFILE": "cloud"},
			resolved{HostPort: "mtls.example:7233", Namespace: "default", TLS: true, ServerName: "name-from-file"}},
		{"TLS options over the profile's", connect.Options{ConfigFile: file, Profile: "mtls",
			TLS: &connect.TLS{ServerName: "name-from-flag"}}, env{"TEMPORAL_TLS_SERVER_NAME": "name-from-env"},
			resolved{HostPort: "mtls.example:7233", Namespace: "default", TLS: true, ServerName: "name-from-flag"}},
		{"the environment's TLS over the profile's", connect.Options{ConfigFile: file, Profile: "mtls"},
			env{"TEMPORAL_TLS_SERVER_NAME": "name-from-env"},
			resolved{HostPort: "mtls.example:7233", Namespace: "default", TLS: true, ServerName: "name-from-env"}},
		{"TLS disabled despite an API key", connect.Options{ConfigFile: file, TLS: &connect.TLS{Disabled: true}},
			env{"TEMPORAL_API_KEY": "env-key"},
			resolved{HostPort: "file-default:7233", Namespace: "file-ns", APIKey: true}},
		{"TEMPORAL_TLS turns it on", connect.Options{ConfigFile: file}, env{"TEMPORAL_TLS": "true"},
			resolved{HostPort: "file-default:7233", Namespace: "file-ns", TLS: true}},
		{"ignoring the environment", connect.Options{ConfigFile: file, IgnoreEnvironment: true},
			env{"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_API_KEY": "env-key"},
			resolved{HostPort: "localhost:7233", Namespace: "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Env = tt.env
			got, err := tt.opts.Resolve()
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			r := resolved{HostPort: got.HostPort, Namespace: got.Namespace, APIKey: got.Credentials != nil,
				TLS: got.ConnectionOptions.TLS != nil && !got.ConnectionOptions.TLSDisabled}
			if got.ConnectionOptions.TLS != nil {
				r.ServerName = got.ConnectionOptions.TLS.ServerName
			}
			if diff := cmp.Diff(tt.want, r); diff != "" {
				t.Errorf("resolved (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveTLSConfigAsIs(t *testing.T) {
	cfg := &tls.Config{ServerName: "given", MinVersion: tls.VersionTLS13}
	got, err := connect.Options{IgnoreEnvironment: true, TLS: &connect.TLS{Config: cfg, ServerName: "ignored"}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got.ConnectionOptions.TLS != cfg {
		t.Errorf("TLS config = %+v, want the one given", got.ConnectionOptions.TLS)
	}
}

func TestResolveErrors(t *testing.T) {
	file := writeProfiles(t)
	tests := []struct {
		name string
		opts connect.Options
		want string
	}{
		{"a missing profile", connect.Options{ConfigFile: file, Profile: "nope"}, "nope"},
		{"a certificate without its key", connect.Options{ConfigFile: file, TLS: &connect.TLS{ClientCertFile: "c.pem"}},
			"cert"},
		{"a missing CA file", connect.Options{ConfigFile: file, TLS: &connect.TLS{ServerCAFile: filepath.Join(t.TempDir(), "ca.pem")}},
			"ca.pem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Env = env{}
			_, err := tt.opts.Resolve()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Resolve error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
