package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/keelrun/keel/server/tool"
)

// resultOf maps a tool result to what the model sees: the text of each
// content block (a line for non-text blocks), then the structured content
// as JSON unless a text block already holds exactly it. isError becomes an
// error result.
func resultOf(res *sdk.CallToolResult) tool.Result {
	var parts []string
	var files []tool.File
	for i, c := range res.Content {
		if img, ok := c.(*sdk.ImageContent); ok {
			// The image itself goes to the model as an attachment; the
			// line stays, so a worker without a store still says one came.
			files = append(files, tool.File{Name: fmt.Sprintf("image %d", i+1), MediaType: img.MIMEType, Data: img.Data})
		}
		if r, ok := c.(*sdk.EmbeddedResource); ok && r.Resource != nil && r.Resource.MIMEType == "application/pdf" && len(r.Resource.Blob) > 0 {
			files = append(files, tool.File{Name: r.Resource.URI, MediaType: r.Resource.MIMEType, Data: r.Resource.Blob})
		}
		parts = append(parts, contentText(c))
	}
	if res.StructuredContent != nil {
		if js, err := json.Marshal(res.StructuredContent); err == nil && !holdsJSON(parts, js) {
			parts = append(parts, string(js))
		}
	}
	return tool.Result{Output: strings.Join(parts, "\n"), IsError: res.IsError, Files: files}
}

func contentText(c sdk.Content) string {
	switch c := c.(type) {
	case *sdk.TextContent:
		return c.Text
	case *sdk.ImageContent:
		return fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.AudioContent:
		return fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data))
	case *sdk.ResourceLink:
		s := "[resource link " + c.URI
		if c.Name != "" {
			s += " (" + c.Name + ")"
		}
		return s + "]"
	case *sdk.EmbeddedResource:
		if r := c.Resource; r != nil {
			if r.Text != "" {
				return r.Text
			}
			return fmt.Sprintf("[resource %s %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob))
		}
	}
	js, _ := json.Marshal(c)
	return string(js)
}

// holdsJSON reports whether a part is the same JSON value as js (servers
// usually repeat structured content as text).
func holdsJSON(parts []string, js []byte) bool {
	var want bytes.Buffer
	if json.Compact(&want, js) != nil {
		return false
	}
	for _, p := range parts {
		var got bytes.Buffer
		if json.Compact(&got, []byte(p)) == nil && bytes.Equal(got.Bytes(), want.Bytes()) {
			return true
		}
	}
	return false
}
