package provider

import (
	"errors"
	"testing"
)

func TestCheckEndpoint(t *testing.T) {
	badURL, noKey := errors.New("bad url"), errors.New("no key")
	tests := []struct {
		url, key string
		want     error
	}{
		{"https://api.example.com/v1", "k", nil},
		{"https://api.example.com/v1", "", noKey},
		{"http://localhost:11434/v1", "", nil},
		{"http://127.0.0.1:8000/v1", "", nil},
		{"http://[::1]:8080/v1", "", nil},
		{"http://10.1.2.3/v1", "", nil},
		{"http://192.168.0.9/v1", "", nil},
		{"http://ollama:11434/v1", "", nil},
		{"http://gpu.local/v1", "", nil},
		{"http://llm.corp.internal/v1", "", nil},
		{"http://8.8.8.8/v1", "", noKey},
		{"localhost:11434/v1", "k", badURL},
		{"ftp://localhost/v1", "k", badURL},
		{"http:///v1", "k", badURL},
		{"://", "k", badURL},
	}
	for _, tt := range tests {
		err := CheckEndpoint(tt.url, tt.key, badURL, noKey)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("CheckEndpoint(%q, %q) = %v, want %v", tt.url, tt.key, err, tt.want)
		}
	}
	if err := CheckEndpoint("api.example.com", "k", badURL, noKey); err.Error() != `bad url: "api.example.com"` {
		t.Errorf("message = %q, want the URL named", err)
	}
}
