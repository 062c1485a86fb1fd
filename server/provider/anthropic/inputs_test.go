package anthropic

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/keelrun/keel"
	"github.com/keelrun/keel/server/provider"
	"github.com/keelrun/keel/server/provider/providertest"
)

// attachmentTranscript is a prompt carrying an image and a PDF, and a
// tool result carrying an image.
func attachmentTranscript() provider.Request {
	render := keel.ToolCall{ID: "call_1", Name: "render_chart"}
	result := keel.ToolResultMessage(render, keel.ToolOK, "Rendered.")
	result.Attachments = []keel.Attachment{providertest.Attachment("image/png", "chart.png", providertest.PNG())}
	prompt := keel.UserMessage("What do these show?")
	prompt.Attachments = []keel.Attachment{
		providertest.Attachment("image/png", "dot.png", providertest.PNG()),
		providertest.Attachment("application/pdf", "brief.pdf", []byte(providertest.PDF)),
	}
	return provider.Request{
		Model: "claude-test",
		Messages: []keel.Message{
			prompt,
			{Role: keel.RoleAssistant, Content: "Let me chart it.", ToolCalls: []keel.ToolCall{render}},
			result,
		},
		MaxTokens: 256,
	}
}

// A prompt's attachments follow its text as image and document blocks
// with base64 sources; a tool result's go inside its content.
func TestRequestBodyAttachments(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/text.sse"))
	if _, err := providertest.Collect(t, subject.Provider(t, srv.URL).Stream(context.Background(), attachmentTranscript())); err != nil {
		t.Fatal(err)
	}
	want := jsonValue(t, providertest.Fixture(t, "testdata/request_attachments.json"))
	if diff := cmp.Diff(want, jsonValue(t, srv.Last().Body)); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

// An attachment whose bytes were not read in is refused before anything
// is sent, never sent empty.
func TestAttachmentWithoutData(t *testing.T) {
	noData := attachmentTranscript()
	noData.Messages[0].Attachments[0].Data = nil
	inResult := attachmentTranscript()
	inResult.Messages[2].Attachments[0].Data = []byte{}
	unknown := attachmentTranscript()
	unknown.Messages[0].Attachments[1].MediaType = "text/plain"
	providertest.CheckBadRequests(t, subject, []providertest.BadRequest{
		{Name: "prompt", Request: noData, Kind: keel.ProviderInvalidRequest},
		{Name: "tool result", Request: inResult, Kind: keel.ProviderInvalidRequest},
		{Name: "unknown type", Request: unknown, Kind: keel.ProviderInvalidRequest},
	})
}

func TestCheckInputs(t *testing.T) {
	both := []keel.AttachmentKind{keel.AttachmentImage, keel.AttachmentDocument}
	image := []keel.AttachmentKind{keel.AttachmentImage}
	pdf := []keel.AttachmentKind{keel.AttachmentDocument}
	tests := []struct {
		name   string
		inputs []keel.AttachmentKind
		model  string
		kinds  []keel.AttachmentKind
		ok     bool
	}{
		{"current model", nil, "claude-sonnet-4-5", both, true},
		{"claude-3-5", nil, "claude-3-5-haiku-latest", both, true},
		{"claude-3-7", nil, "claude-3-7-sonnet-20250219", both, true},
		{"unknown name", nil, "my-proxy-model", both, true},
		{"claude-3 image", nil, "claude-3-haiku-20240307", image, true},
		{"claude-3 pdf", nil, "claude-3-opus-20240229", pdf, false},
		{"claude-3-sonnet pdf", nil, "claude-3-sonnet-20240229", both, false},
		{"claude-2 image", nil, "claude-2.1", image, false},
		{"claude-instant image", nil, "claude-instant-1.2", image, false},
		{"override allows", both, "claude-2.1", both, true},
		{"override images only", image, "claude-sonnet-4-5", pdf, false},
		{"override none", []keel.AttachmentKind{}, "claude-sonnet-4-5", image, false},
		{"no kinds", []keel.AttachmentKind{}, "claude-2.1", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(Config{APIKey: testKey, Inputs: tt.inputs})
			if err != nil {
				t.Fatal(err)
			}
			err = provider.CheckInputs(p, tt.model, tt.kinds)
			if tt.ok != (err == nil) {
				t.Fatalf("CheckInputs(%q, %v) = %v, want ok %v", tt.model, tt.kinds, err, tt.ok)
			}
			var ke *keel.Error
			if err != nil && (!errors.As(err, &ke) || ke.Code != keel.CodeInvalidInput || !strings.Contains(err.Error(), tt.model)) {
				t.Errorf("error = %#v, want invalid input naming the model", err)
			}
		})
	}
}

// The model's name is clipped in the refusal.
func TestCheckInputsClipsModel(t *testing.T) {
	p, err := New(Config{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	model := "claude-2-" + strings.Repeat("x", 500)
	err = p.CheckInputs(model, []keel.AttachmentKind{keel.AttachmentImage})
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("error = %v, want a short refusal", err)
	}
}

func TestNewInputs(t *testing.T) {
	if _, err := New(Config{APIKey: testKey, Inputs: []keel.AttachmentKind{"audio"}}); !errors.Is(err, ErrBadInputs) {
		t.Errorf("New with inputs [audio]: %v, want ErrBadInputs", err)
	}
}
