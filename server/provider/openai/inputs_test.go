package openai

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

// attachmentTranscript is a prompt carrying an image and a PDF, a batch
// of two tool results the first of which carries an image, and steering.
func attachmentTranscript() provider.Request {
	render := keel.ToolCall{ID: "call_1", Name: "render_chart"}
	count := keel.ToolCall{ID: "call_2", Name: "count_rows"}
	rendered := keel.ToolResultMessage(render, keel.ToolOK, "Rendered.")
	rendered.Attachments = []keel.Attachment{providertest.Attachment("image/png", "chart.png", providertest.PNG())}
	prompt := keel.UserMessage("What do these show?")
	prompt.Attachments = []keel.Attachment{
		providertest.Attachment("image/png", "dot.png", providertest.PNG()),
		providertest.Attachment("application/pdf", "brief.pdf", []byte(providertest.PDF)),
	}
	return provider.Request{
		Model: "gpt-test",
		Messages: []keel.Message{
			prompt,
			{Role: keel.RoleAssistant, ToolCalls: []keel.ToolCall{render, count}},
			rendered,
			keel.ToolResultMessage(count, keel.ToolOK, "42"),
			{Role: keel.RoleUser, Content: "And the legend?", SteeringID: "st-1"},
		},
	}
}

// On Chat Completions a prompt's attachments are image_url and file
// parts after its text; the tool results' attachments come in a user
// message right after their batch, since a tool message carries text only.
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

// On the Responses API a prompt's attachments are input_image and
// input_file content after its text, and a tool result's are in its
// function_call_output's output, after its text.
func TestResponsesRequestBodyAttachments(t *testing.T) {
	srv := providertest.NewServer(t, providertest.SSE(t, "testdata/responses_text.sse"))
	if _, err := providertest.Collect(t, responsesSubject.Provider(t, srv.URL).Stream(context.Background(), attachmentTranscript())); err != nil {
		t.Fatal(err)
	}
	want := jsonValue(t, providertest.Fixture(t, "testdata/responses_request_attachments.json"))
	if diff := cmp.Diff(want, jsonValue(t, srv.Last().Body)); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

// An attachment whose bytes were not read in is refused before anything
// is sent, never sent empty, on both APIs.
func TestAttachmentWithoutData(t *testing.T) {
	noData := attachmentTranscript()
	noData.Messages[0].Attachments[0].Data = nil
	inResult := attachmentTranscript()
	inResult.Messages[2].Attachments[0].Data = []byte{}
	unknown := attachmentTranscript()
	unknown.Messages[0].Attachments[1].MediaType = "text/plain"
	cases := []providertest.BadRequest{
		{Name: "prompt", Request: noData, Kind: keel.ProviderInvalidRequest},
		{Name: "tool result", Request: inResult, Kind: keel.ProviderInvalidRequest},
		{Name: "unknown type", Request: unknown, Kind: keel.ProviderInvalidRequest},
	}
	t.Run("chat", func(t *testing.T) { providertest.CheckBadRequests(t, subject, cases) })
	t.Run("responses", func(t *testing.T) { providertest.CheckBadRequests(t, responsesSubject, cases) })
}

func TestCheckInputs(t *testing.T) {
	both := []keel.AttachmentKind{keel.AttachmentImage, keel.AttachmentDocument}
	image := []keel.AttachmentKind{keel.AttachmentImage}
	const ollama = "http://localhost:11434/v1"
	tests := []struct {
		name    string
		baseURL string
		inputs  []keel.AttachmentKind
		model   string
		kinds   []keel.AttachmentKind
		ok      bool
	}{
		{"gpt-4o", "", nil, "gpt-4o-mini", both, true},
		{"gpt-4.1", "", nil, "gpt-4.1-nano", both, true},
		{"gpt-4.5", "", nil, "gpt-4.5-preview", both, true},
		{"gpt-5", "", nil, "gpt-5-mini", both, true},
		{"chatgpt-4o", "", nil, "chatgpt-4o-latest", both, true},
		{"o1", "", nil, "o1", both, true},
		{"o1 dated", "", nil, "o1-2024-12-17", both, true},
		{"o3", "", nil, "o3", both, true},
		{"o3-pro", "", nil, "o3-pro", both, true},
		{"o4-mini", "", nil, "o4-mini", both, true},
		{"fine-tuned", "", nil, "ft:gpt-4o-mini-2024-07-18:acme::abc123", image, true},
		{"explicit openai URL", "https://api.openai.com/v1", nil, "gpt-4o", both, true},
		{"gpt-3.5", "", nil, "gpt-3.5-turbo", image, false},
		{"gpt-4", "", nil, "gpt-4", image, false},
		{"gpt-4 dated", "", nil, "gpt-4-0613", image, false},
		{"o1-mini", "", nil, "o1-mini", image, false},
		{"o1-preview", "", nil, "o1-preview", image, false},
		{"o3-mini", "", nil, "o3-mini", image, false},
		{"other server", ollama, nil, "gpt-4o", image, false},
		{"other server declared", ollama, image, "qwen2.5vl:7b", image, true},
		{"other server declared images only", ollama, image, "qwen2.5vl:7b", both, false},
		{"override on openai", "", []keel.AttachmentKind{}, "gpt-4o", image, false},
		{"override allows", "", both, "gpt-3.5-turbo", both, true},
		{"no kinds", ollama, nil, "qwen3:8b", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(Config{BaseURL: tt.baseURL, APIKey: testKey, Inputs: tt.inputs})
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

// On a server other than OpenAI's the refusal tells the operator what
// to declare; the model's name is clipped.
func TestCheckInputsOtherServer(t *testing.T) {
	p, err := New(Config{BaseURL: "http://vllm:8000/v1"})
	if err != nil {
		t.Fatal(err)
	}
	err = p.CheckInputs(strings.Repeat("m", 500), []keel.AttachmentKind{keel.AttachmentDocument})
	if err == nil || !strings.Contains(err.Error(), "inputs") || !strings.Contains(err.Error(), "keel.yaml") ||
		strings.Contains(err.Error(), strings.Repeat("m", 65)) {
		t.Errorf("error = %v, want a refusal naming inputs in keel.yaml, the model clipped", err)
	}
}

func TestNewInputs(t *testing.T) {
	if _, err := New(Config{APIKey: testKey, Inputs: []keel.AttachmentKind{"audio"}}); !errors.Is(err, ErrBadInputs) {
		t.Errorf("New with inputs [audio]: %v, want ErrBadInputs", err)
	}
}

func TestFileName(t *testing.T) {
	for name, want := range map[string]string{"": "document.pdf", "brief.pdf": "brief.pdf", "Brief.PDF": "Brief.PDF", "notes": "notes.pdf"} {
		if got := fileName(keel.Attachment{Name: name}); got != want {
			t.Errorf("fileName(%q) = %q, want %q", name, got, want)
		}
	}
}
