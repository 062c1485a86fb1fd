package mcp

import (
	"errors"
	"testing"
)

func TestServerConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   ServerConfig
		field string // "" for valid
	}{
		{"stdio", ServerConfig{Name: "fs", Command: "npx", Args: []string{"x"}, Env: map[string]string{"A": "b"}}, ""},
		{"http", ServerConfig{Name: "search-1", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"X": "y"}}, ""},
		{"bad name", ServerConfig{Name: "my.server", Command: "npx"}, "name"},
		{"empty name", ServerConfig{Command: "npx"}, "name"},
		{"neither", ServerConfig{Name: "fs"}, "command"},
		{"both", ServerConfig{Name: "fs", Command: "npx", URL: "http://x/mcp"}, "url"},
		{"headers on stdio", ServerConfig{Name: "fs", Command: "npx", Headers: map[string]string{"X": "y"}}, "headers"},
		{"env on http", ServerConfig{Name: "fs", URL: "http://x/mcp", Env: map[string]string{"A": "b"}}, "args"},
		{"not http", ServerConfig{Name: "fs", URL: "ftp://x/mcp"}, "url"},
		{"negative timeout", ServerConfig{Name: "fs", Command: "npx", Timeout: -1}, "timeout"},
	} {
		err := tc.cfg.Validate()
		var cerr *ConfigError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.name, err)
		case tc.field != "" && (!errors.As(err, &cerr) || cerr.Field != tc.field):
			t.Errorf("%s: %v, want a ConfigError on %s", tc.name, err, tc.field)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"TOKEN": "t0k", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for in, want := range map[string]string{
		"Bearer ${TOKEN}":     "Bearer t0k",
		"${TOKEN}-${TOKEN}":   "t0k-t0k",
		"${EMPTY}x":           "x",
		"cost $5, $TOKEN, ${": "cost $5, $TOKEN, ${",
	} {
		got, err := expand(in, lookup)
		if err != nil || got != want {
			t.Errorf("expand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := expand("Bearer ${MISSING}", lookup); err == nil || err.Error() != "environment variable MISSING is not set" {
		t.Errorf("missing variable: %v", err)
	}
}
