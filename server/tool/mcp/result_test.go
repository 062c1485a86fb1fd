package mcp

import (
	"reflect"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/tool"
)

func TestResultOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *sdk.CallToolResult
		want tool.Result
	}{
		{"text blocks", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}},
			tool.Result{Output: "a\nb"}},
		{"error", &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such city"}}},
			tool.Result{Output: "no such city", IsError: true}},
		{"structured only", &sdk.CallToolResult{StructuredContent: map[string]any{"t": 21}},
			tool.Result{Output: `{"t":21}`}},
		{"structured repeated as text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "{\n  \"t\": 21\n}"}},
			StructuredContent: map[string]any{"t": 21}}, tool.Result{Output: "{\n  \"t\": 21\n}"}},
		{"structured beside prose", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "It is warm."}},
			StructuredContent: map[string]any{"t": 21}}, tool.Result{Output: "It is warm.\n{\"t\":21}"}},
		{"other blocks", &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.ImageContent{MIMEType: "image/png", Data: []byte("1234")},
			&sdk.ResourceLink{URI: "file:///a.txt", Name: "a"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///b.txt", Text: "bee"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///c.bin", MIMEType: "application/zip", Blob: []byte("zz")}},
		}}, tool.Result{Output: "[image image/png, 4 bytes]\n[resource link file:///a.txt (a)]\nbee\n[resource file:///c.bin application/zip, 2 bytes]",
			Files: []tool.File{{Name: "image 1", MediaType: "image/png", Data: []byte("1234")}}}},
		{"a PDF resource", &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///r.pdf", MIMEType: "application/pdf", Blob: []byte("%PDF-1.4")}},
		}}, tool.Result{Output: "[resource file:///r.pdf application/pdf, 8 bytes]",
			Files: []tool.File{{Name: "file:///r.pdf", MediaType: "application/pdf", Data: []byte("%PDF-1.4")}}}},
	} {
		if got := resultOf(tc.res); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestProgressText(t *testing.T) {
	for want, p := range map[string]*sdk.ProgressNotificationParams{
		"3/5":          {Progress: 3, Total: 5},
		"3/5: copying": {Progress: 3, Total: 5, Message: "copying"},
		"0.5: halfway": {Progress: 0.5, Message: "halfway"},
	} {
		if got := progressText(p); got != want {
			t.Errorf("progressText(%+v) = %q, want %q", p, got, want)
		}
	}
}
